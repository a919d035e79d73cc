"""Pick a model: the demo model, or one from the Hugging Face cache.

The cache is listed by :func:`tuner.model.cache.cached_models` in a thread
worker (it walks the disk); the list shows each repo with its size, and the
note under it is the core's sentence (how many, or why none).
"""

from __future__ import annotations

from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.screens.main import DEMO_LABEL
from tui.widgets.model_panel import human_bytes
from tuner.model.cache import cached_models


class ModelPicker(ModalScreen[str | None]):
    """A list of models to choose from."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="picker.cancel")
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Pick a model (Enter), Esc cancels", classes="dialog-title")
            yield OptionList(
                Option(f"{DEMO_LABEL}  (tiny generated Llama for the CPU engine)", id=DEMO_LABEL),
                id="picker-list",
            )
            yield Static("scanning the Hugging Face cache…", id="picker-note")

    def on_mount(self) -> None:
        self.scan()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def scan(self) -> None:
        listed = cached_models()
        self.app.call_from_thread(self._show, listed.models, listed.note)

    def _show(self, found: list[tuple[str, int]], note: str) -> None:
        options = self.query_one(OptionList)
        for repo_id, size in found:
            options.add_option(Option(f"{repo_id}  ({human_bytes(size)})", id=repo_id))
        self.query_one("#picker-note", Static).update(note)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
