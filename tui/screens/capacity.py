"""The capacity dialog: the SLO a capacity search must hold, in vLLM's spelling.

The text is parsed by ``tuner.lab.capacity.parse`` (as ``tunelab capacity
--slo`` parses it), so what the dialog accepts is what the CLI accepts; a
typo is a notification with the fix, and nothing starts.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class CapacityDialog(ModalScreen[str | None]):
    """Asks for the SLO; Enter starts the search of the current config."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="capacity.cancel")
    ]

    def __init__(self, slo: str) -> None:
        super().__init__()
        self.slo = slo

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Capacity of the current config under an SLO", classes="dialog-title")
            yield Static(
                "The most users (concurrency) meeting every bound, searched on 3 engine "
                "launches: p99_ttft_ms<=500,p99_itl_ms<=50. Enter starts, Esc cancels."
            )
            yield Input(self.slo, placeholder="p99_ttft_ms<=500", id="capacity-slo")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
