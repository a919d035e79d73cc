"""Foreign text made safe to show: one rule for the terminal, the TUI and the report.

A study name, a knob value, a trial id, a preset's description, a model's
``config.json`` string, a server's error text: anything that did not come
from tunelab's own strings may hold terminal escape sequences (which can move
the cursor, retitle the window or hide text), control characters, bidi
controls (which reorder what the reader sees, "Trojan Source") or lone
surrogates (which cannot be encoded, so printing or writing them raises).

:func:`clean` removes escape sequences and control characters (newline and
tab are kept: they are layout, not commands) and replaces every invisible
formatting character with a visible ``<U+XXXX>``, so the reader sees that
something was there. It lives at the top of ``tuner`` (no layer) so the CLI
(:mod:`tuner.cli.safe_text`), the report (:mod:`tuner.report`) and the TUI
share it.
"""

from __future__ import annotations

import re

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

# Invisible characters that change how the text around them is shown: the bidi
# embeddings, overrides, isolates and marks (U+202A-U+202E, U+2066-U+2069,
# U+200E/U+200F, U+061C), zero-width and other format characters, the line and
# paragraph separators (a line break that a terminal does not show as one), the
# interlinear annotations, the tag characters, and lone surrogates (unencodable:
# printing one raises UnicodeEncodeError). The zero-width (non-)joiners U+200C/
# U+200D are left alone: scripts such as Persian and Devanagari need them.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)


def _visible(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def clean(text: object) -> str:
    """``text`` as a string safe to show: no escapes or controls, invisible characters made visible.

    Newline and tab are kept; a caller that shows one line replaces them itself.
    """
    stripped = _CONTROLS.sub("", _ESCAPES.sub("", str(text)))
    return _INVISIBLE.sub(_visible, stripped)


def one_line(text: object) -> str:
    """:func:`clean`, with newlines and tabs turned into spaces: for a table cell or a label."""
    return re.sub(r"[\n\t]", " ", clean(text))
