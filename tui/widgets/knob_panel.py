"""The knob panel: every catalogue knob, grouped, with a switch, select or input.

The panel is built from ``tuner.knobs`` alone: a BOOL knob gets a Switch, a
CHOICE knob a Select (blank = vLLM's default) and every other type an Input
(empty = vLLM's default) whose text is parsed by ``tuner.knobs.coerce``.
Knobs that have no effect on the target (platform, vLLM version) stay
visible, marked ``n/a`` with the reason in their help, because hiding them
would hide why a preset from another node behaves differently here.
Values come down from the screen (:meth:`KnobPanel.show_config`); edits go up
as :class:`~tui.messages.KnobChanged` / :class:`~tui.messages.KnobInvalid`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import DescendantFocus
from textual.message import Message
from textual.widget import AwaitMount
from textual.widgets import Input, Label, Select, Static, Switch

from tui.messages import KnobChanged, KnobFocused, KnobInvalid
from tui.widgets.parking import Parking
from tuner import knobs as catalogue
from tuner.config import ConfigError, EngineConfig
from tuner.knobs import Availability, Knob, ValueType
from tuner.lab import checks


def value_text(value: Any) -> str:
    """How a typed knob value is shown in an Input."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def as_bool(value: Any) -> bool:
    """Env values are strings ("1"/"0"); engine values are bools."""
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def _on_off(on: bool) -> str:
    return "on" if on else "off"


class KnobRow(Horizontal, Parking):
    """One knob: its name (marked when not applicable) and its control.

    Esc in a control *parks* focus on the row itself instead of sending it back
    to the top of the panel (B11; :class:`tui.widgets.parking.Parking`).
    """

    def __init__(self, knob: Knob, choices: tuple[str, ...]) -> None:
        super().__init__(classes="knob-row", id=f"knob-{_dom_id(knob.key)}")
        self.knob = knob
        self.choices = choices
        self.not_here: frozenset[str] = frozenset()
        self.value_reasons: dict[str, str] = {}  # ⊘ value -> why it will not run as named
        self.availability = Availability(catalogue.AvailabilityStatus.AVAILABLE)

    def compose(self) -> ComposeResult:
        knob = self.knob
        yield Label(self._name_text(), classes="knob-name")
        if self.tristate:
            # A switch cannot show "vLLM decides" (the default of these depends on the
            # model and version), so they get default / on / off.
            yield Select(
                [("on", "on"), ("off", "off")], prompt="default", allow_blank=True, compact=True
            )
        elif knob.type is ValueType.BOOL:
            state = as_bool(knob.default)
            yield Switch(value=state)
            # The state in words too: a switch's position and colour alone are not read
            # by everyone (a colour-blind user, a monochrome terminal).
            yield Label(_on_off(state), classes="switch-state")
        elif knob.type is ValueType.CHOICE:
            yield Select(
                [(c, c) for c in self.choices],
                prompt=f"default{'' if knob.default is None else f' ({knob.default})'}",
                allow_blank=True,
                compact=True,
            )
        else:
            placeholder = "default" if knob.default is None else f"{value_text(knob.default)}"
            yield Input(placeholder=placeholder, compact=True)

    @property
    def tristate(self) -> bool:
        """A BOOL knob whose default vLLM decides at run time."""
        return self.knob.type is ValueType.BOOL and self.knob.default is None

    @property
    def control(self) -> Switch | Select[str] | Input:
        return self.query_one("Switch, Select, Input")  # type: ignore[return-value]

    def set_choices(
        self,
        choices: tuple[str, ...],
        marks: Mapping[str, str],
        prompt: str | None = None,
    ) -> None:
        """Offer ``choices`` (the target vLLM's), those in ``marks`` last, marked ⊘ and dimmed
        (``marks``: value -> why it will not run as named here, shown in the help line);
        ``prompt``: what "default" resolves to on the target.

        A name that exists but does not apply to the platform stays selectable (a
        preset may target another node) but never reads as a normal choice (B7).
        """
        control = self.control
        if self.tristate or not isinstance(control, Select):
            return
        not_here = frozenset(marks)
        self.value_reasons = dict(marks)
        current = control.value
        ordered = tuple(c for c in choices if c not in not_here) + tuple(
            c for c in choices if c in not_here
        )
        if current is not Select.NULL and str(current) not in ordered:
            ordered = (*ordered, str(current))  # never drop what the config holds
        new_prompt = prompt is not None and prompt != control.prompt
        if ordered == self.choices and not_here == self.not_here and not new_prompt:
            return
        if prompt is not None:
            control.prompt = prompt
        self.tooltip = self.help_text()
        self.choices, self.not_here = ordered, not_here
        options = [
            (Text.assemble(("⊘ ", "yellow"), (c, "dim")) if c in not_here else Text(c), c)
            for c in ordered
        ]
        with control.prevent(Select.Changed):
            control.set_options(options)
            if current is not Select.NULL:
                control.value = current

    def mark(self, availability: Availability) -> None:
        """Mark the knob not applicable (still editable) with the reason kept for the help line."""
        if availability == self.availability:
            return  # restyling a row costs milliseconds; ~55 rows would add up
        self.availability = availability
        self.set_class(not availability.ok, "-na")
        self.query_one(".knob-name", Label).update(self._name_text())
        self.tooltip = self.help_text()

    def apply_target(self, version: str | None, platform: str | None) -> None:
        """Availability mark and (for choices) the target's values, those elsewhere marked."""
        self.mark(catalogue.available(self.knob, version, platform))
        if version and self.knob.type is ValueType.CHOICE:
            choices = catalogue.choices_for(self.knob, version)
            self.set_choices(
                choices,
                checks.value_marks(self.knob, choices, version, platform),
                checks.default_text(self.knob, version, platform),
            )

    def _name_text(self) -> Text:
        """The key, after a ⊘ when the knob has no effect on the target."""
        mark = "  " if self.availability.ok else "⊘ "
        return Text.assemble((mark, "yellow"), self.knob.key)

    def on_mount(self) -> None:
        # Rows of later groups mount after the first paint: take the panel's current state.
        panel = next((a for a in self.ancestors if isinstance(a, KnobPanel)), None)
        if panel is None or not self.query("Switch, Select, Input"):
            return  # no panel, or the row is being torn down (the app quit while rows mounted)
        if panel.config is not None:
            self.set_value(panel.config.get(self.knob.key))
        if panel.target is not None:
            self.apply_target(*panel.target)

    def help_text(self) -> str:
        """Help line: the catalogue's help, its source, and why it is n/a if so."""
        parts = [f"{self.knob.key}: {self.knob.help}"]
        if not self.availability.ok:
            parts.append(f"[n/a: {self.availability.reason}]")
        elif self.availability.note:
            parts.append(f"[{self.availability.note}]")
        parts.extend(f"[{line}]" for line in checks.grouped_marks(self.value_reasons))
        if self.knob.source:
            parts.append(f"({self.knob.cited_source})")
        return " ".join(parts)

    def set_value(self, value: Any) -> None:
        """Show ``value`` (None = vLLM default) without posting a change."""
        control = self.control
        knob = self.knob
        if isinstance(control, Switch):
            shown = (
                value
                if value is not None
                else (knob.default if knob.default is not None else False)
            )
            with control.prevent(Switch.Changed):
                control.value = as_bool(shown)
            self._show_state(as_bool(shown))
        elif isinstance(control, Select):
            with control.prevent(Select.Changed):
                if value is None:
                    control.clear()
                elif self.tristate:
                    control.value = "on" if as_bool(value) else "off"
                else:
                    text = str(value)
                    if text not in self.choices:
                        self.choices = (*self.choices, text)
                        control.set_options([(c, c) for c in self.choices])
                    control.value = text
        else:
            text = value_text(value)
            if control.value != text:
                with control.prevent(Input.Changed):
                    control.value = text
            control.remove_class("-invalid")

    def _show_state(self, on: bool) -> None:
        for label in self.query(".switch-state").results(Label):
            label.update(_on_off(on))

    @on(Switch.Changed)
    def _switch(self, event: Switch.Changed) -> None:
        event.stop()
        self._show_state(event.value)
        value: Any = event.value
        default = self.knob.default
        if default is not None and as_bool(default) == value:
            value = None  # back at vLLM's default: leave it out of the config
        self.post_message(KnobChanged(self.knob.key, value))

    @on(Select.Changed)
    def _select(self, event: Select.Changed) -> None:
        event.stop()
        value: Any = None if event.value is Select.NULL else str(event.value)
        if self.tristate and value is not None:
            value = value == "on"
        self.post_message(KnobChanged(self.knob.key, value))

    @on(Input.Changed)
    def _input(self, event: Input.Changed) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            event.input.remove_class("-invalid")
            self.post_message(KnobChanged(self.knob.key, None))
            return
        try:
            value = catalogue.coerce(self.knob.key, text)
        except ConfigError as exc:
            event.input.add_class("-invalid")
            self.post_message(KnobInvalid(self.knob.key, str(exc)))
            return
        event.input.remove_class("-invalid")
        self.post_message(KnobChanged(self.knob.key, value))

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        self.post_message(KnobFocused(self.knob.key))


class KnobPanel(VerticalScroll):
    """All knobs by group: catalogue order, with what applies to the target first (issue 32).

    The screen is composed with the group titles only; the rows mount once the
    app has put the whole first frame on the terminal (:meth:`reveal_soon`,
    :meth:`_reveal_rest`), or at once when the user jumps to one of their knobs
    (:meth:`focus_knob`). Mounting them holds the event loop for about a third of
    a second on a 2-core box: started before the first frame was out, it kept
    that frame off the screen just as long.
    The ~55 rows and their selects are most of the screen's widgets: mounting
    them before the first frame cost about a second on a 2-core box (issue 13
    "Speed"). They mount together, in one layout pass: one group per tick cost
    a full-screen layout each.
    Rows that mount late read :attr:`config` and :attr:`target` on mount.
    """

    REVEAL_AFTER_PAINT_S = 0.05  # the writer thread gets the frame to the terminal first
    REVEAL_LATEST_S = 3.0  # if the app never says the frame is out, mount them anyway
    FIRST_GROUPS = 2  # the groups a 24- to 48-line screen shows first

    def __init__(self, version: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.version = version
        self.config: EngineConfig | None = None
        self.target: tuple[str | None, str | None] | None = None
        self._pending: dict[str, tuple[Knob, ...]] = {}
        self._reveal_due = False

    def compose(self) -> ComposeResult:
        for group, items in catalogue.groups().items():
            title = catalogue.GROUP_TITLES.get(group, group)
            self._pending[group] = items
            yield Vertical(
                Static(title, classes="knob-group"),
                classes="knob-block",
                id=f"group-{_dom_id(group)}",
            )

    def _rows(self, items: tuple[Knob, ...]) -> list[KnobRow]:
        version, platform = self.target or (self.version, None)
        return [
            KnobRow(knob, catalogue.choices_for(knob, version))
            for knob in catalogue.applicable_first(items, version, platform)
        ]

    @property
    def complete(self) -> bool:
        """Whether every group's rows are mounted (or on their way)."""
        return not self._pending

    def reveal(self, group: str) -> AwaitMount | None:
        """Mount ``group``'s rows now (None if they are already there)."""
        items = self._pending.pop(group, None)
        if items is None:
            return None
        block = self.query_one(f"#group-{_dom_id(group)}", Vertical)
        return block.mount_all(self._rows(items))

    class Revealed(Message):
        """Every knob row is mounted (the start-up's heavy part is over)."""

    async def _reveal_rest(self) -> None:
        """Mount the groups on screen first, then every other one in one go.

        The first :data:`FIRST_GROUPS` groups in the target's order (what the panel
        shows first) mount alone, so their rows reach the terminal after one small
        layout pass; the rest follow in one pass (not one per group) once that frame
        is out. Issue 32: the screen is usable when the visible knob rows are drawn.
        """
        version, platform = self.target or (self.version, None)
        order = [g for g in catalogue.group_order(version, platform) if g in self._pending]
        first = [w for w in (self.reveal(g) for g in order[: self.FIRST_GROUPS]) if w is not None]
        for mount in first:
            await mount
        # After the frame with those rows is composed, and the writer got it out.
        self.call_after_refresh(self.set_timer, self.REVEAL_AFTER_PAINT_S, self._reveal_others)

    async def _reveal_others(self) -> None:
        waiting = [w for w in (self.reveal(g) for g in list(self._pending)) if w is not None]
        for mount in waiting:
            await mount
        self.post_message(self.Revealed())

    def on_mount(self) -> None:
        self.border_title = "Knobs"
        self.set_timer(self.REVEAL_LATEST_S, self.reveal_soon)

    def reveal_soon(self, delay: float = REVEAL_AFTER_PAINT_S) -> None:
        """Mount the pending rows after ``delay`` (the app calls it once its first frame is out)."""
        if self._pending and not self._reveal_due:
            self._reveal_due = True
            self.set_timer(delay, self._reveal_rest)

    def row(self, key: str) -> KnobRow:
        """The row of a knob by catalogue key."""
        return self.query_one(f"#knob-{_dom_id(key)}", KnobRow)

    def focus_knob(self, key: str) -> bool:
        """Focus a knob's control and scroll it into view (the `/` filter and the palette).

        A knob whose group has not mounted yet gets its group mounted first and is
        focused once it is there. Returns False only for a key the catalogue lacks.
        """
        try:
            row = self.row(key)
        except NoMatches:
            group = next((g for g, items in self._pending.items() if _has(items, key)), None)
            if group is None:
                return False
            self.call_next(self._reveal_and_focus, group, key)
            return True
        row.control.focus(scroll_visible=False)
        self.scroll_to_widget(row, animate=False, top=False)
        return True

    async def _reveal_and_focus(self, group: str, key: str) -> None:
        waiting = self.reveal(group)
        if waiting is not None:
            await waiting
        with contextlib.suppress(NoMatches):
            row = self.row(key)
            row.control.focus(scroll_visible=False)
            self.scroll_to_widget(row, animate=False, top=False)

    def _mounted_rows(self) -> list[KnobRow]:
        return _rows_ready(self.query(KnobRow))

    def show_config(self, config: EngineConfig, keep: Collection[str] = ()) -> None:
        """Set every control from ``config`` (attributes down; no messages posted).

        Rows named in ``keep`` hold invalid text the user has not corrected yet: it stays
        shown (marked) rather than being replaced by the config's value.
        """
        self.config = config
        for row in self._mounted_rows():
            if row.knob.key not in keep:
                row.set_value(config.get(row.knob.key))

    def _order_groups(self, order: list[str]) -> None:
        """Put the group blocks in ``order`` (the core's: groups that apply first)."""
        blocks = [self.query_one(f"#group-{_dom_id(g)}", Vertical) for g in order]
        for place, block in enumerate(blocks):
            if list(self.children).index(block) == place:
                continue
            if place == 0:
                self.move_child(block, before=0)
            else:
                self.move_child(block, after=blocks[place - 1])

    def _order_rows(self, group: str, knobs: list[Knob]) -> None:
        """Put a mounted group's rows in ``knobs``' order (below the group's title)."""
        block = self.query_one(f"#group-{_dom_id(group)}", Vertical)
        rows = [row for row in block.query_children(KnobRow) if isinstance(row, KnobRow)]
        by_key = {row.knob.key: row for row in rows}
        wanted = [by_key[k.key] for k in knobs if k.key in by_key]
        if [r.knob.key for r in rows] == [r.knob.key for r in wanted]:
            return
        for place, row in enumerate(wanted):
            if place == 0:
                block.move_child(row, after=0)  # after the title
            else:
                block.move_child(row, after=wanted[place - 1])

    def mark_availability(self, version: str | None, platform: str | None) -> int:
        """Mark knobs that do not apply to the target; returns how many are n/a.

        Choice lists follow the target too: the names the target vLLM version has
        (46 attention backends on 0.32, not the 67 of all versions), with those
        that do not run on the platform marked (``tuner.knobs.value_sets``).
        """
        self.target = (version, platform)
        for row in self._mounted_rows():
            row.apply_target(version, platform)
        self._order_groups(catalogue.group_order(version, platform))
        for group, items in catalogue.groups().items():
            if group not in self._pending:  # mounted: its rows in the target's order too
                self._order_rows(group, catalogue.applicable_first(items, version, platform))
        count = sum(not catalogue.available(k, version, platform).ok for k in catalogue.KNOBS)
        self.border_subtitle = f"{count} n/a on {platform or '?'}" if count else ""
        return count


def _rows_ready(rows: Iterable[KnobRow]) -> list[KnobRow]:
    """Rows whose on_mount has run: a row still mounting reads the panel's state itself."""
    return [row for row in rows if row.is_mounted]


def _has(items: tuple[Knob, ...], key: str) -> bool:
    return any(knob.key == key for knob in items)


def _dom_id(key: str) -> str:
    """Knob keys as DOM ids (they are already letters, digits, '-' and '_')."""
    return key.replace(".", "-")
