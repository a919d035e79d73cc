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

    def __init__(self, detached_job: str | None = None) -> None:
        super().__init__()
        self.detached_job = detached_job

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            if self.detached_job is not None:
                yield Static("An A/B runs in the study service", classes="dialog-title")
                yield Static(
                    f"Quit anyway? Job {self.detached_job} goes on; reopen tunelab to see its "
                    "verdict (`tunelab jobs` lists it). Queued runs of this TUI are dropped."
                )
                label = "Quit (y)"
            else:
                yield Static("A run is active", classes="dialog-title")
                yield Static(
                    "Quit anyway? The engine's whole process tree is stopped first; the trial is marked interrupted."
                )
                label = "Stop and quit (y)"
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stay (n)", id="no", compact=True)
                yield Button(label, id="yes", variant="error", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
