"""Foreign text made safe to print through Rich.

A study name, a knob value, a trial id, a server's error text: anything that
did not come from tunelab's own strings may hold Rich markup (``[/]`` ends a
style that was never opened and raises MarkupError, losing the output),
terminal escape sequences (which can move the cursor, retitle the window or
hide text) or bidi controls (which reorder what the reader sees). Issue 19
found the first two with hostile study names and knob values, issue 26 the
third. Every such value goes through :func:`markup` before it meets Rich
markup, or :func:`clean` where it is printed as plain text. :func:`clean` is
:func:`tuner.foreign_text.clean`, the one rule the report and the TUI use too.
"""

from __future__ import annotations

from rich.markup import escape

from tuner.foreign_text import clean, one_line

__all__ = ["clean", "markup", "one_line"]


def markup(text: object) -> str:
    """``text`` cleaned and escaped, so Rich prints it literally inside markup."""
    return escape(clean(text))
