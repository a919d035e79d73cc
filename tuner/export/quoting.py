"""Quoting for the text tunelab writes into shell scripts and comments.

Model names, paths and values come from users and from shared presets, so
they may hold spaces, quotes, ``$``, backticks or newlines. Every value is
written inside single quotes, where bash expands nothing, with each ``'``
written as ``'\\''``; a newline inside single quotes is literal, so it cannot
start a new command. NUL cannot be passed through argv or the environment at
all, so it is refused (presets with NUL are rejected on load as well). Text
that goes into a comment is flattened to one line, so a crafted description
cannot end the comment and smuggle in a command.
"""

from __future__ import annotations

import re

from tuner.errors import TunelabError

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


class QuotingError(TunelabError, ValueError):
    """A value cannot be written safely (it holds a NUL byte)."""


def shell_quote(value: str) -> str:
    """Quotes ``value`` for bash so that it is passed through as one word, unchanged.

    Always quotes (even plain words) so every value in a script looks the
    same and a reviewer never has to wonder whether one was missed.

    Raises:
        QuotingError: if the value holds a NUL byte, which no process can receive.
    """
    if "\x00" in value:
        raise QuotingError(
            f"value {value[:40]!r} contains a NUL byte, which cannot be passed to a "
            "process; remove it from the preset"
        )
    return "'" + value.replace("'", "'\\''") + "'"


def ansi_c_quote(value: str) -> str:
    """Quotes ``value`` as bash ``$'...'`` with every control character escaped.

    Used where the result must stay on one line (inside a YAML comment): the
    text can be pasted into bash and gives back exactly ``value``.

    Raises:
        QuotingError: if the value holds a NUL byte.
    """
    if "\x00" in value:
        raise QuotingError(f"value {value[:40]!r} contains a NUL byte; remove it")
    if not _CONTROL_RE.search(value):
        return shell_quote(value)
    out = []
    for char in value:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif char == "'":
            out.append("\\'")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif char in "\u2028\u2029\x85":
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    return "$'" + "".join(out) + "'"


def comment_text(value: str, limit: int = 200) -> str:
    """``value`` made safe for a ``#`` comment: one line, no control characters, bounded.

    Args:
        value: Any text (a preset name, a description, a model id).
        limit: Longest result; longer text ends with an ellipsis.
    """
    flat = _CONTROL_RE.sub(" ", value)
    flat = " ".join(flat.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat
