"""The one-line header: node, vLLM version and platform, model, engine state.

It holds no clock on purpose: the screen must be identical between two
renders of the same state (snapshot tests), and a clock costs idle CPU.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

STATE_STYLES = {
    "idle": "dim",
    "starting": "bold yellow",
    "ready": "bold cyan",
    "warm-up": "bold cyan",
    "measuring": "bold green",
    "profiling": "bold magenta",  # a profiled A/B arm, after its measured run (issue 29)
    "stopping": "bold red",
}


class StatusBar(Widget):
    """Node · vLLM version (platform) · model · engine state, set by the screen."""

    node: reactive[str] = reactive("")
    vllm: reactive[str] = reactive("vLLM: probing…")
    model: reactive[str] = reactive("")
    engine_state: reactive[str] = reactive("idle")

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" tunelab ", style="bold reverse")
        text.append(f" {self.node} ", style="bold")
        text.append("│ ")
        text.append(self.vllm)
        text.append(" │ ")
        text.append(self.model or "no model", style="italic")
        text.append(" │ engine: ")
        text.append(self.engine_state, style=STATE_STYLES.get(self.engine_state, "bold"))
        return text
