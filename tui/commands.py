"""Every action of the app, once: the key bindings and the command palette read this table.

One table keeps the footer, the palette and the docs from drifting apart: an
action that exists has a key shown in the footer and an entry in the
palette (ctrl+p), with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider


@dataclass(frozen=True)
class ActionSpec:
    """One user action.

    Attributes:
        key: Key binding (Textual key name).
        action: The app action it runs (``action_<name>``).
        title: Short label (footer and palette).
        help: One sentence for the palette.
        show: Whether the footer shows it (all are in the palette).
    """

    key: str
    action: str
    title: str
    help: str
    show: bool = True


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec(
        "r", "run", "Run", "Run one trial of the current config and workload in the background"
    ),
    ActionSpec(
        "a",
        "ab",
        "A/B",
        "A/B the current config against the baseline, with repeats, and give a verdict",
    ),
    ActionSpec("w", "sweep", "Sweep", "Sweep the focused knob over a few values, the rest fixed"),
    ActionSpec("s", "stop", "Stop", "Stop the run: the engine's whole process tree is killed"),
    ActionSpec("f", "fix", "Fix", "Apply the first finding's fix to the config"),
    ActionSpec(
        "t", "results", "Results", "Show the table of all trials of the study, and the plot"
    ),
    ActionSpec(
        "c", "compare", "Compare", "Compare two trials side by side with a verdict per metric"
    ),
    ActionSpec(
        "e", "export", "Export", "Export a trial (default: the winner) as preset and launch script"
    ),
    ActionSpec(
        "m", "pick_model", "Model", "Pick a model from the Hugging Face cache or the demo model"
    ),
    ActionSpec(
        "b", "baseline", "Baseline", "Use the last done trial as the A/B baseline", show=False
    ),
    ActionSpec(
        "d", "toggle_dark", "Theme", "Switch between the light and the dark theme", show=False
    ),
    ActionSpec(
        "q", "quit", "Quit", "Quit (asks first when a run is active, then stops the engine)"
    ),
)


def bindings() -> list[Binding]:
    """The app's bindings, with ids (so users can remap them in a keymap file)."""
    return [
        Binding(spec.key, spec.action, spec.title, show=spec.show, id=f"tunelab.{spec.action}")
        for spec in ACTIONS
    ]


class TunelabCommands(Provider):
    """Command palette entries for every action in :data:`ACTIONS`."""

    def _entries(self) -> list[tuple[str, str, str]]:
        return [(f"{spec.title} ({spec.key})", spec.action, spec.help) for spec in ACTIONS]

    async def discover(self) -> Hits:
        for title, action, help_text in self._entries():
            yield DiscoveryHit(title, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, action, help_text in self._entries():
            score = max(matcher.match(title), matcher.match(help_text) * 0.8)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(title),
                    partial(self.app.run_action, action),
                    help=help_text,
                )
