"""The `/` knob filter: type part of a knob's name, Enter jumps to it.

B11 (issue 13): reaching a knob took 15–65 Tabs. With this dialog any knob
is `/`, a few letters of its name, Enter — the focus lands on the knob's
control with its row scrolled into view. Matching is on the catalogue key
and group title (substring first, then Textual's fuzzy matcher, the one the
command palette uses), so `max-num` and `mns` both find `max-num-seqs`.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.fuzzy import Matcher
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tuner import knobs as catalogue

MAX_SHOWN = 40


def match_knobs(query: str) -> list[catalogue.Knob]:
    """Knobs whose key (or group) matches ``query``, best first; all of them for an empty query.

    A substring of the key beats a fuzzy match, an earlier substring a later one.
    """
    query = query.strip()
    if not query:
        return list(catalogue.KNOBS)
    matcher = Matcher(query)
    needle = query.lower()
    ranked: list[tuple[tuple[int, float], catalogue.Knob]] = []
    for knob in catalogue.KNOBS:
        key = knob.key.lower()
        at = key.find(needle)
        if at >= 0:  # substring: earlier, then shorter keys first
            rank = (1, -at - len(key) / 1000)
        else:
            group = catalogue.GROUP_TITLES.get(knob.group, knob.group)
            score = max(matcher.match(knob.key), matcher.match(group) * 0.5)
            if score <= 0:
                continue
            rank = (0, score)
        ranked.append((rank, knob))
    ranked.sort(key=lambda pair: pair[0], reverse=True)
    return [knob for _rank, knob in ranked]


class KnobJump(ModalScreen[str | None]):
    """Filter the knobs by name; dismisses with the chosen knob's key (None: Esc)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Close", id="knob-jump.close"),
        Binding("down", "move(1)", "Next", show=False, id="knob-jump.down"),
        Binding("up", "move(-1)", "Previous", show=False, id="knob-jump.up"),
    ]

    def __init__(self, available: dict[str, bool] | None = None) -> None:
        """``available``: knob key -> whether it applies to the target (n/a ones are marked)."""
        super().__init__()
        self.available = available or {}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="knob-jump"):
            yield Static("Jump to a knob: type part of its name, Enter", classes="dialog-title")
            yield Input(placeholder="e.g. max-num, attention, aiter", id="knob-jump-input")
            yield OptionList(id="knob-jump-list")

    def on_mount(self) -> None:
        self._fill("")

    def _fill(self, query: str) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        # The knobs that apply to the target first (the core's order), each half best first.
        ranked = match_knobs(query)
        matches = [k for k in ranked if self.available.get(k.key) is not False]
        matches = (matches + [k for k in ranked if self.available.get(k.key) is False])[:MAX_SHOWN]
        for knob in matches:
            label = Text(knob.key)
            group = catalogue.GROUP_TITLES.get(knob.group, knob.group)
            label.append(f"  {group}", style="dim")
            if self.available.get(knob.key) is False:
                label.append("  ⊘ n/a here", style="yellow")
            options.add_option(Option(label, id=knob.key))
        if matches:
            options.highlighted = 0

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._choose()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            current = options.highlighted or 0
            options.highlighted = max(0, min(options.option_count - 1, current + step))

    def _choose(self) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted
        if index is None:
            self.notify("No knob matches.", severity="warning")
            return
        self.dismiss(options.get_option_at_index(index).id)
