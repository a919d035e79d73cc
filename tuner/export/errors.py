"""Errors of import and export, shaped so a user can fix the file at once.

A schema problem is an :class:`Issue`: the key it concerns (as a dotted path
such as ``engine.max-num-seqs``), the line of that key in the file, what is
wrong and how to fix it. :class:`PresetError` carries all of a file's issues,
so a user sees every mistake in one go instead of one per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tuner.errors import RunFailedError, TunelabError


class Severity(StrEnum):
    """How bad an issue is: errors block loading; warnings are shown by ``presets check``."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Issue:
    """One problem found in a preset file.

    Attributes:
        key: Dotted key path (``engine.max-num-seqs``); empty for the whole file.
        message: What is wrong.
        fix: How to fix it.
        line: 1-based line of the key in the file, where known.
        severity: Error or warning.
    """

    key: str
    message: str
    fix: str = ""
    line: int | None = None
    severity: Severity = Severity.ERROR

    def format(self, source: str = "") -> str:
        """``FILE:LINE: [key] message (fix: ...)`` in one line."""
        where = source or "<preset>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        key = f" {self.key}:" if self.key else ""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{where}: {self.severity}:{key} {self.message}.{fix}"


@dataclass
class PresetError(TunelabError, ValueError):
    """A preset that cannot be loaded or written; holds every issue found.

    Attributes:
        source: File name (or ``<preset>``) the issues refer to.
        issues: The problems, errors first.
    """

    source: str
    issues: list[Issue] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        errors = [i for i in self.issues if i.severity is Severity.ERROR] or self.issues
        head = f"{self.source or '<preset>'}: {len(errors)} problem(s) in the preset"
        return "\n".join([head, *(f"  {i.format(self.source)}" for i in errors)])


class ExportError(RunFailedError, RuntimeError):
    """Export could not complete (a file exists, the disk is full, ...); nothing half-written."""


class IssueCollector:
    """Gathers a file's issues, attaching the line of each key from the text."""

    def __init__(self, lines: dict[tuple[str, ...], int]) -> None:
        self.lines = lines
        self.errors: list[Issue] = []
        self.warnings: list[Issue] = []

    def line_of(self, path: tuple[str, ...]) -> int | None:
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def error(self, path: tuple[str, ...], message: str, fix: str = "") -> None:
        self.errors.append(Issue(".".join(path), message, fix, self.line_of(path)))

    def warn(self, path: tuple[str, ...], message: str, fix: str = "") -> None:
        self.warnings.append(
            Issue(".".join(path), message, fix, self.line_of(path), Severity.WARNING)
        )


def describe(value: Any) -> str:
    """A short phrase naming a TOML value and its type, for messages."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"
