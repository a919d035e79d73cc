"""The sweep dialog: ``KEY=V1,V2,...`` pre-filled for the focused knob.

The text is parsed by ``tuner.lab.run.parse_param`` (``tuner.studies.space``'s
parser, the same syntax as ``tunelab sweep``), so what the dialog accepts is what
the CLI accepts.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from tui.screens.line_dialog import LineDialog
from tuner.config import EngineValue
from tuner.knobs import Knob, ValueType, choices_for


def suggest(knob: Knob, current: EngineValue | None) -> str:
    """A starting text for sweeping ``knob``: its two states, a few choices, or ×½ ×1 ×2."""
    if knob.type is ValueType.BOOL:
        values = "0,1" if knob.kind == "env" else "false,true"
    elif knob.type is ValueType.CHOICE:
        values = ",".join(choices_for(knob)[:3])
    elif knob.type is ValueType.INT and not isinstance(current, dict | list):
        # (a table or list where a number belongs is shown as text, as other kinds are)
        base = int(current if current is not None else (knob.default or 64))
        values = ",".join(str(v) for v in sorted({max(1, base // 2), base, base * 2}))
    else:
        values = str(current if current is not None else (knob.default or ""))
    return f"{knob.key}={values}"


class SweepDialog(LineDialog):
    """Asks for the knob and values to sweep."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="sweep.cancel")
    ]
    HEADING = "Sweep one knob, the rest fixed"
    HINT = "KEY=V1,V2,... (or KEY=int:LO..HI). Enter starts, Esc cancels."
    PLACEHOLDER = "max-num-seqs=8,32,64"
    FIELD_ID = "sweep-spec"
