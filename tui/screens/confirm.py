"""Quit confirmation while a run is active: quitting stops the engine first."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmQuit(ModalScreen[bool]):
    """Asks before quitting with a run active; yes stops the engine tree, then exits."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Quit", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "Stay", id="confirm.no"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("A run is active", classes="dialog-title")
            yield Static(
                "Quit anyway? The engine's whole process tree is stopped first; the trial is marked interrupted."
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stay (n)", id="no", compact=True)
                yield Button("Stop and quit (y)", id="yes", variant="error", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
