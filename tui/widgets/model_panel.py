"""The model: an id or path to type (or pick from the HF cache), and what it is.

Analysis (``tuner.model_info.analyze``) runs in a thread worker owned by the
screen; this panel only shows its result: architecture, size, KV bytes per
token, and whether it fits the visible VRAM.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static

from tui.messages import ModelRequested


def human_bytes(n: float | None) -> str:
    """1536 -> '1.5 KiB'."""
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class ModelPanel(Vertical):
    """Model id/path input and a one-line description."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="model-row"):
            yield Input(
                placeholder="model id or path (m: pick from HF cache)",
                id="model-input",
                compact=True,
            )
        yield Static("", id="model-info")

    def on_mount(self) -> None:
        self.border_title = "Model"

    def set_model(self, model: str, label: str | None = None) -> None:
        """Show ``model`` in the input without posting a request."""
        box = self.query_one("#model-input", Input)
        with box.prevent(Input.Submitted):
            box.value = label or model

    def show_info(self, text: Text | str) -> None:
        self.query_one("#model-info", Static).update(text)

    @on(Input.Submitted, "#model-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.post_message(ModelRequested(event.value.strip()))
