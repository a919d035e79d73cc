"""A one-line dialog: a title, a hint, one field; Enter answers the text, Esc None.

The sweep and capacity dialogs are this shape; each names its texts and its
binding id, and the core parses what comes back (so the dialog accepts what the
CLI accepts).
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class LineDialog(ModalScreen[str | None]):
    """Asks for one line of text; subclasses set the texts and an Esc binding with their id."""

    HEADING: ClassVar[str] = ""
    HINT: ClassVar[str] = ""
    PLACEHOLDER: ClassVar[str] = ""
    FIELD_ID: ClassVar[str] = "line"

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.HEADING, classes="dialog-title")
            yield Static(self.HINT)
            yield Input(self.text, placeholder=self.PLACEHOLDER, id=self.FIELD_ID)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
