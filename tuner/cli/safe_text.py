"""Foreign text made safe to print through Rich.

A study name, a knob value, a trial id, a server's error text: anything that
did not come from tunelab's own strings may hold Rich markup (``[/]`` ends a
style that was never opened and raises MarkupError, losing the output) or
terminal escape sequences (which can move the cursor, retitle the window or
hide text). Issue 19 found both with hostile study names and knob values.
Every such value goes through :func:`markup` before it meets Rich markup, or
:func:`clean` where it is printed as plain text.
"""

from __future__ import annotations

import re

from rich.markup import escape

# ECMA-48: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), DCS/SOS/PM/APC
# strings, and two-byte ESC sequences; then C0/C1 control characters except
# newline and tab (kept: they are layout, not commands).
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_].*?(?:\x07|\x1b\\|$)"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]",
    re.DOTALL,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: object) -> str:
    """``text`` as a string with terminal escape sequences and control characters removed."""
    return _CONTROLS.sub("", _ESCAPES.sub("", str(text)))


def markup(text: object) -> str:
    """``text`` cleaned and escaped, so Rich prints it literally inside markup."""
    return escape(clean(text))
