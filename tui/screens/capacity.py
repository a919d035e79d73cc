"""The capacity dialog: the SLO a capacity search must hold, in vLLM's spelling.

The text is parsed by ``tuner.lab.capacity.parse`` (as ``tunelab capacity
--slo`` parses it), so what the dialog accepts is what the CLI accepts; a
typo is a notification with the fix, and nothing starts.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from tui.screens.line_dialog import LineDialog


class CapacityDialog(LineDialog):
    """Asks for the SLO; Enter starts the search of the current config."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="capacity.cancel")
    ]
    HEADING = "Capacity of the current config under an SLO"
    HINT = (
        "The most users (concurrency) meeting every bound, searched on 3 engine "
        "launches: p99_ttft_ms<=500,p99_itl_ms<=50. Enter starts, Esc cancels."
    )
    PLACEHOLDER = "p99_ttft_ms<=500"
    FIELD_ID = "capacity-slo"
