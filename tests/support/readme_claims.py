"""Reading claims out of README.md, for the README checks (tests/test_readme_*.py).

The README's code (inline spans and code-block lines), its sections and tables,
and the claims the checks test: the tunelab commands it names, the repository
paths it names, the rows of its TUI key table and the two set-up commands of its
quick start. Every reader goes through ``readme()``, so a check can be run on a
false README (``check_fails_on_false_readme``) to prove that it can fail.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


# ---- reading the README -------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A piece of code in the README: an inline code span or one code-block line."""

    line: int  # 1-based line of the README where it starts
    text: str  # whitespace collapsed; a table's ``\\|`` is ``|``
    block: bool  # a code-block line (else an inline span)


@cache
def readme() -> str:
    return README.read_text(encoding="utf-8")


@cache
def code_blocks() -> tuple[tuple[int, tuple[str, ...]], ...]:
    """(line of the opening fence, the block's lines) for every fenced block."""
    blocks: list[tuple[int, tuple[str, ...]]] = []
    lines = readme().splitlines()
    start: int | None = None
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            if start is None:
                start = i
            else:
                blocks.append((start + 1, tuple(lines[start + 1 : i])))
                start = None
    assert start is None, f"README.md line {start + 1 if start else 0}: unclosed code fence"
    return tuple(blocks)


@cache
def prose() -> str:
    """The README with the fenced blocks blanked (line numbers kept)."""
    lines = readme().splitlines()
    for start, body in code_blocks():
        for i in range(start - 1, start + len(body) + 1):
            lines[i] = ""
    return "\n".join(lines)


def _collapse(text: str) -> str:
    return " ".join(text.replace("\\|", "|").split())


@cache
def spans() -> tuple[Span, ...]:
    """Every inline code span (a span may wrap lines within a paragraph) and code line."""
    out: list[Span] = []
    text = prose()
    for para in re.finditer(r"(?:[^\n]+\n?)+", text):
        first = text.count("\n", 0, para.start()) + 1
        for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", para.group(0)):
            line = first + para.group(0).count("\n", 0, m.start())
            out.append(Span(line, _collapse(m.group(1)), block=False))
    for start, body in code_blocks():
        for offset, raw in enumerate(body, start=1):
            code = re.split(r"\s#\s", " " + raw, maxsplit=1)[0].strip()
            if code:
                out.append(Span(start + offset, _collapse(code), block=True))
    return tuple(sorted(out, key=lambda s: s.line))


def line_of(pos: int) -> int:
    return readme().count("\n", 0, pos) + 1


def section(title: str) -> str:
    """The text under a ``## title`` heading, up to the next ``## ``."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", readme(), re.M | re.S)
    assert m, f"README.md has no '## {title}' section"
    return m.group(1)


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the Markdown table whose header row starts with ``header``."""
    lines = text.splitlines()
    rows: list[list[str]] = []
    for i, line in enumerate(lines):
        if line.startswith(header):
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
                rows.append([c.strip() for c in cells])
            break
    assert rows, f"README.md: no table with header {header!r}"
    return rows


def tokens(text: str) -> list[str]:
    """The words of a command line, ``[...]`` and ``(...)`` brackets stripped."""
    text = text.replace("|", " | ")
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return [w.strip("[]()") for w in words]


# ---- the tunelab commands it names ------------------------------------------------------------


@cache
def cli_root() -> Any:
    """The `tunelab` command as Click sees it (tui.cli adds the `tui` command)."""
    import typer.main

    import tui.cli  # noqa: F401  (registers `tunelab tui` on the app)
    from tuner.cli.app import app

    return typer.main.get_command(app)


def subcommands(cmd: Any, ctx: Any) -> dict[str, Any]:
    if not hasattr(cmd, "list_commands"):
        return {}
    return {name: cmd.get_command(ctx, name) for name in cmd.list_commands(ctx)}


@cache
def command_claims() -> tuple[tuple[Span, tuple[str, ...]], ...]:
    """Every place the README names a tunelab command, with the words after `tunelab`.

    ``tunelab ...`` / ``./tunelab ...`` spans and code lines; spans that start
    with a command's name and say more (``ab --report``, ``jobs follow|log|stop
    ID``); and ``...`` spans that follow bare command names on the same line
    (``run``, ``ab`` ``... [--guard-prompts FILE]``).
    """
    top = set(subcommands(cli_root(), cli_root().make_context("tunelab", [])))
    claims: list[tuple[Span, tuple[str, ...]]] = []
    bare: dict[int, list[str]] = {}  # line -> bare command names seen on it
    for span in spans():
        words = tokens(span.text)
        if not words:
            continue
        if words[0] in ("tunelab", "./tunelab"):
            claims.append((span, tuple(words[1:])))
        elif span.block:
            continue
        elif words[0] in top and len(words) == 1:
            bare.setdefault(span.line, []).append(words[0])
        elif words[0] in top:
            claims.append((span, tuple(words)))
        elif span.text.startswith("... ") and bare.get(span.line):
            for name in bare.pop(span.line):
                claims.append((span, (name, *words[1:])))
    return tuple(claims)


# ---- the paths, keys and set-up commands it names ---------------------------------------------

PATH = re.compile(
    r"(?<![\w./-])((?:\.ci|benchmarks|docs|presets|scripts|screenshots|tests|tuner|tui)/[\w./-]*)"
)


@cache
def path_claims() -> tuple[tuple[int, str], ...]:
    return tuple((line_of(m.start()), m.group(1).rstrip(".,")) for m in PATH.finditer(readme()))


@cache
def key_rows() -> tuple[tuple[tuple[str, ...], str], ...]:
    """(keys as written, action text) for each row of the README's TUI key table."""
    rows = []
    for cells in table_rows(section("The TUI"), "| key | action |"):
        keys = tuple(re.findall(r"`([^`]+)`", cells[0]))
        assert keys, f"README key table: a row with no key: {cells}"
        rows.append((keys, cells[1]))
    return tuple(rows)


@cache
def setup_commands() -> dict[str, str]:
    """{'app': './tunelab', 'tests': './run-tests'} from the quick start's code block."""
    block = re.search(
        r"```bash\n(.*?)```", section("Quick start (a fresh machine, no GPU needed)"), re.S
    )
    assert block, "README's quick start has no bash block"
    found = {}
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        if command.strip():
            found["tests" if "test" in comment else "app"] = command.split()[0]
    assert set(found) == {"app", "tests"}, f"quick start should name two commands: {found}"
    return found


# ---- each check fails on a false README -------------------------------------------------------

DERIVED = (code_blocks, prose, spans, command_claims, path_claims, key_rows, setup_commands)

# (check, the README's text, a false version of it, what the failure must name)
Mutation = tuple[Any, str, str, str]


def mutation_ids(mutations: list[Mutation]) -> list[str]:
    return [f"{m[0].__name__.removeprefix('test_')}-{m[3]}" for m in mutations]


def check_fails_on_false_readme(
    monkeypatch: pytest.MonkeyPatch, check: Any, true: str, false: str, named: str
) -> None:
    """``check`` fails, naming ``named``, on the README with ``true`` replaced by ``false``.

    The false README replaces ``readme`` here and in the check's own module
    (which calls it directly where it reads the README's text).
    """
    text = readme()
    assert true in text, f"the README no longer says {true!r}: update this mutation"

    def false_readme() -> str:
        return text.replace(true, false, 1)

    for module in (sys.modules[__name__], sys.modules[check.__module__]):
        if hasattr(module, "readme"):
            monkeypatch.setattr(module, "readme", false_readme)
    for derived in DERIVED:
        derived.cache_clear()
    try:
        with pytest.raises(AssertionError) as failure:
            check()
        assert named in str(failure.value), str(failure.value)
    finally:
        for derived in DERIVED:
            derived.cache_clear()
