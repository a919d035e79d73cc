"""Errors of import and export, shaped so a user can fix the file at once.

A schema problem is an :class:`Issue`: the key it concerns (as a dotted path
such as ``engine.max-num-seqs``), the line of that key in the file, what is
wrong and how to fix it. :class:`PresetError` carries all of a file's issues,
so a user sees every mistake in one go instead of one per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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
class PresetError(ValueError):
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


class ExportError(RuntimeError):
    """Export could not complete (a file exists, the disk is full, ...); nothing half-written."""
