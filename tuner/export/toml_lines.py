"""Finds the line of each key in a TOML text, so errors can point at it.

``tomllib`` gives values but no positions. Preset errors must name the key
and its line, so this module scans the text once: table headers
(``[engine]``, ``[engine.compilation-config]``, ``[[x]]``), ``key = value``
lines (bare, quoted and dotted keys) and inline tables on one line. Multi-line
strings are skipped so their content is never mistaken for keys. It is a
locator, not a parser: the document has already been parsed by ``tomllib``.
"""

from __future__ import annotations

import re

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _parse_key(text: str, pos: int) -> tuple[list[str], int] | None:
    """Parses a (dotted) key at ``pos``; returns its parts and the position after it."""
    parts: list[str] = []
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos >= n:
            return None
        char = text[pos]
        if char == '"':
            end = pos + 1
            buf = []
            while end < n and text[end] != '"':
                if text[end] == "\\" and end + 1 < n:
                    buf.append(_unescape(text[end : end + 2]))
                    end += 2
                    continue
                buf.append(text[end])
                end += 1
            if end >= n:
                return None
            parts.append("".join(buf))
            pos = end + 1
        elif char == "'":
            end = text.find("'", pos + 1)
            if end < 0:
                return None
            parts.append(text[pos + 1 : end])
            pos = end + 1
        else:
            match = _BARE.match(text, pos)
            if not match:
                return None
            parts.append(match.group(0))
            pos = match.end()
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos < n and text[pos] == ".":
            pos += 1
            continue
        return parts, pos


def _unescape(pair: str) -> str:
    return {"\\n": "\n", "\\t": "\t", '\\"': '"', "\\\\": "\\"}.get(pair, pair[1:])


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Maps each key path (``("engine", "max-num-seqs")``) to its first 1-based line.

    Table headers map their own path too, so an issue about a whole table
    (``("engine",)``) points at ``[engine]``.
    """
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_multiline: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw
        if in_multiline:
            if in_multiline in line:
                in_multiline = None
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            double = stripped.startswith("[[")
            parsed = _parse_key(stripped, 2 if double else 1)
            if parsed:
                table = tuple(parsed[0])
                lines.setdefault(table, number)
            continue
        parsed = _parse_key(line, 0)
        if not parsed:
            continue
        parts, pos = parsed
        if pos >= len(line) or line[pos] != "=":
            continue
        path = (*table, *parts)
        lines.setdefault(path, number)
        rest = line[pos + 1 :].lstrip()
        for quote in ('"""', "'''"):
            if rest.startswith(quote) and rest.count(quote) == 1:
                in_multiline = quote
        if rest.startswith("{"):
            _inline_keys(rest, path, number, lines)
    return lines


def _inline_keys(
    text: str, prefix: tuple[str, ...], number: int, lines: dict[tuple[str, ...], int]
) -> None:
    """Records the keys of a one-line inline table ``{ a = 1, b = { c = 2 } }``."""
    stack = [prefix]
    pos = 0
    expect_key = False
    n = len(text)
    while pos < n:
        char = text[pos]
        if char == "{":
            expect_key = True
            pos += 1
        elif char == "}":
            if len(stack) > 1:
                stack.pop()
            pos += 1
            expect_key = False
        elif char == ",":
            expect_key = True
            pos += 1
        elif char in "\"'" and not expect_key:
            end = text.find(char, pos + 1)
            pos = n if end < 0 else end + 1
        elif expect_key and char not in " \t":
            parsed = _parse_key(text, pos)
            if not parsed:
                return
            parts, pos = parsed
            path = (*stack[-1], *parts)
            lines.setdefault(path, number)
            expect_key = False
            if pos < n and text[pos] == "=":
                pos += 1
                while pos < n and text[pos] in " \t":
                    pos += 1
                if pos < n and text[pos] == "{":
                    stack.append(path)
        else:
            pos += 1
