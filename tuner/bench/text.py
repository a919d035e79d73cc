"""Server-supplied text made safe to show: no terminal escapes, no Rich markup.

A server's model id, error bodies and event text are foreign input. Printed
raw, ``[/]`` raised a Rich MarkupError after the run (results lost) and an
ESC sequence could rewrite the user's terminal (issue 19, "Rich markup is not
escaped"). ``clean`` strips C0/C1 control characters and ANSI/OSC escape
sequences; ``shown`` also escapes Rich markup for console output.
"""

from __future__ import annotations

import re

from rich.markup import escape

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte ESC sequences,
# then any remaining C0 (except tab/newline) and C1 control characters.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def clean(text: str) -> str:
    """``text`` without terminal escape sequences or control characters."""
    return _ESCAPES.sub("", text)


def shown(text: object) -> str:
    """``text`` ready for a Rich console: cleaned and markup-escaped."""
    return escape(clean(str(text)))
