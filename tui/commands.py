"""Every action of the app, once: the key bindings and the command palette read this table.

One table keeps the footer, the palette and the docs from drifting apart: an
action that exists has a key shown in the footer and an entry in the
palette (ctrl+p), with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from tuner.knobs import KNOBS


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
    ActionSpec(
        "P",
        "ab_profile",
        "A/B+profile",
        "A/B as `a` does, each arm's first launch profiled after its measured run: the compare "
        "view then says why B is faster, by kernel family",
        show=False,
    ),
    ActionSpec(
        "w",
        "sweep",
        "Sweep",
        "Sweep the focused knob over a few values, the rest fixed",
        show=False,
    ),
    ActionSpec(
        "k",
        "capacity",
        "Capacity",
        "Capacity under an SLO: the most users the current config carries while "
        "e.g. p99_ttft_ms<=500 holds, over 3 engine launches (as `tunelab capacity`)",
        show=False,
    ),
    ActionSpec("s", "stop", "Stop", "Stop the run: the engine's whole process tree is killed"),
    ActionSpec(
        "f", "fix", "Fix", "Apply a finding's fix to the config (asks which when several have one)"
    ),
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
        "p",
        "report",
        "Report",
        "Write the study report (report.html and report.md, as `tunelab report`) and say where",
        show=False,
    ),
    ActionSpec(
        "j",
        "jobs",
        "Jobs",
        "Detached jobs (`tunelab jobs start -- ...`): list, follow one's output, stop",
        show=False,
    ),
    ActionSpec("slash", "find_knob", "Knob", "Jump to a knob: type part of its name, then Enter"),
    ActionSpec(
        "l",
        "engine_log",
        "Log",
        "Show the engine's full log (searchable; shutdown output marked) and its file",
    ),
    ActionSpec(
        "m",
        "pick_model",
        "Model",
        "Pick a model from the Hugging Face cache or the demo model",
        show=False,
    ),
    ActionSpec(
        "b", "baseline", "Baseline", "Use the last done trial as the A/B baseline", show=False
    ),
    ActionSpec(
        "g",
        "preview_target",
        "Target",
        "Preview another node: the findings and ⊘ marks for a GPU/version (e.g. MI300X)",
        show=False,
    ),
    ActionSpec(
        "v",
        "validate",
        "Validate",
        "Ask the installed vLLM to build this config with its own validators (no engine; "
        "~10 s the first time, then cached): its refusals join the findings, in its words",
        show=False,
    ),
    ActionSpec(
        "d", "toggle_dark", "Light/dark", "Switch between the light and the dark theme", show=False
    ),
    ActionSpec("question_mark,f1", "help", "Keys", "Show every key of the app (? or F1)"),
    ActionSpec(
        "q", "quit", "Quit", "Quit (asks first when a run is active, then stops the engine)"
    ),
)


def bindings() -> list[BindingType]:
    """The app's bindings, with ids (so users can remap them in a keymap file)."""
    return [
        Binding(spec.key, spec.action, spec.title, show=spec.show, id=f"tunelab.{spec.action}")
        for spec in ACTIONS
    ]


# Keys that are not app actions (widgets' own), for the key help screen.
NAVIGATION: tuple[tuple[str, str], ...] = (
    ("Tab / Shift+Tab", "Next / previous field (from a parked field: the next one)"),
    ("Esc", "Leave a field; the focus stays on its knob or workload field, so r, a, f ... work"),
    ("Enter", "On a parked field: edit it again; in a dialog: confirm"),
    ("Space", "Toggle a switch; open a dropdown"),
    ("Ctrl+P", "Command palette: every action, and every knob by name"),
    ("Esc (dialog)", "Close a dialog or view; the focus returns where it was"),
)


def key_label(key: str) -> str:
    """`question_mark,f1` -> `? / F1` (what the user presses)."""
    names = {"question_mark": "?", "slash": "/"}
    return " / ".join(names.get(k, k.upper() if len(k) > 1 else k) for k in key.split(","))


def jump_to_knob(app: Any, key: str) -> None:
    """Back to the main screen, focus ``key``'s control and scroll it into view."""
    from tui.widgets.knob_panel import KnobPanel  # the panel imports tui.messages: no cycle here

    main = app.main
    while app.screen is not main and len(app.screen_stack) > 1:
        app.pop_screen()
    panel = main.query_one(KnobPanel)
    if not panel.focus_knob(key):
        app.notify(f"{key}: its group is still loading; try again in a moment.")


class TunelabCommands(Provider):
    """Command palette entries for every action in :data:`ACTIONS`, and every knob by name."""

    def _entries(self) -> list[tuple[str, str, str]]:
        return [
            (f"{spec.title} ({key_label(spec.key)})", spec.action, spec.help) for spec in ACTIONS
        ]

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
        for knob in KNOBS:
            score = matcher.match(knob.key)
            if score > 0:
                yield Hit(
                    score * 0.9,  # an action named like the query stays on top
                    Content("Knob: ") + matcher.highlight(knob.key),
                    partial(jump_to_knob, self.app, knob.key),
                    text=f"Knob: {knob.key}",
                    help=knob.help,
                )
