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

import json
from collections.abc import Collection
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.events import Blur, DescendantFocus
from textual.lazy import Lazy
from textual.widgets import Input, Label, Select, Static, Switch

from tui.messages import KnobChanged, KnobFocused, KnobInvalid
from tuner import knobs as catalogue
from tuner.config import ConfigError, EngineConfig
from tuner.knobs import Availability, Knob, ValueType
from tuner.knobs.value_sets import backend_platforms


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


class KnobRow(Horizontal):
    """One knob: its name (marked when not applicable) and its control.

    Esc in a control *parks* focus on the row itself instead of sending it back
    to the top of the panel (B11: the next Tab restarted at the first knob):
    the single-key actions work on a parked row, Enter edits it again and
    Tab / Shift+Tab go on from this knob. The row is focusable only while
    parked, so Tab never stops on it twice.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "park", "Leave field", show=False, id="knob.park"),
        Binding("enter", "edit", "Edit", show=False, id="knob.edit"),
        Binding("tab", "walk(1)", "Next", show=False, id="knob.next"),
        Binding("shift+tab", "walk(-1)", "Previous", show=False, id="knob.previous"),
    ]

    def __init__(self, knob: Knob, choices: tuple[str, ...]) -> None:
        super().__init__(classes="knob-row", id=f"knob-{_dom_id(knob.key)}")
        self.knob = knob
        self.choices = choices
        self.not_here: frozenset[str] = frozenset()
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
            yield Switch(value=as_bool(knob.default))
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

    def set_choices(self, choices: tuple[str, ...], not_here: frozenset[str]) -> None:
        """Offer ``choices`` (the target vLLM's), those in ``not_here`` last, marked ⊘ and dimmed.

        A name that exists but does not apply to the platform stays selectable (a
        preset may target another node) but never reads as a normal choice (B7).
        """
        control = self.control
        if self.tristate or not isinstance(control, Select):
            return
        current = control.value
        ordered = tuple(c for c in choices if c not in not_here) + tuple(
            c for c in choices if c in not_here
        )
        if current is not Select.NULL and str(current) not in ordered:
            ordered = (*ordered, str(current))  # never drop what the config holds
        if ordered == self.choices and not_here == self.not_here:
            return
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
            self.set_choices(choices, not_on_platform(self.knob, choices, platform))

    def _name_text(self) -> Text:
        """The key, after a ⊘ when the knob has no effect on the target."""
        mark = "  " if self.availability.ok else "⊘ "
        return Text.assemble((mark, "yellow"), self.knob.key)

    def on_mount(self) -> None:
        # Rows of later groups mount after the first paint: take the panel's current state.
        panel = next((a for a in self.ancestors if isinstance(a, KnobPanel)), None)
        if panel is None:
            return
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

    @on(Switch.Changed)
    def _switch(self, event: Switch.Changed) -> None:
        event.stop()
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

    # -- focus: park on Esc, go on from here -------------------------------------

    @property
    def parked(self) -> bool:
        return self.has_focus

    def action_park(self) -> None:
        """Leave the control but keep the place: focus the row itself."""
        self.can_focus = True
        self.focus(scroll_visible=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Enter / Tab belong to the control (Input submits, Select opens) unless parked.
        if action in ("edit", "walk"):
            return self.parked
        if action == "park":
            return not self.parked
        return True

    def action_edit(self) -> None:
        self.control.focus()

    def action_walk(self, step: int) -> None:
        """Tab from a parked row: the next (or previous) focusable after this knob's control."""
        screen = self.screen
        if step > 0:  # the row's own control comes next in the chain: start after it
            screen.set_focus(self.control, scroll_visible=False)
            screen.focus_next()
        else:
            screen.focus_previous()

    def _on_blur(self, event: Blur) -> None:
        self.can_focus = False


class KnobPanel(VerticalScroll):
    """All knobs by group, in catalogue order.

    The groups are mounted lazily, after the first paint (``textual.lazy.Lazy``):
    the ~55 rows and their selects are most of the screen's widgets, and the
    user should see the screen before they exist.
    Rows that mount late read :attr:`config` and :attr:`target` on mount.
    """

    def __init__(self, version: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.version = version
        self.config: EngineConfig | None = None
        self.target: tuple[str | None, str | None] | None = None

    def compose(self) -> ComposeResult:
        for group, items in catalogue.groups().items():
            title = catalogue.GROUP_TITLES.get(group, group)
            block = Vertical(
                Static(title, classes="knob-group"),
                *(KnobRow(knob, catalogue.choices_for(knob, self.version)) for knob in items),
                classes="knob-block",
            )
            yield Lazy(block)

    def on_mount(self) -> None:
        self.border_title = "Knobs"

    def row(self, key: str) -> KnobRow:
        """The row of a knob by catalogue key."""
        return self.query_one(f"#knob-{_dom_id(key)}", KnobRow)

    def focus_knob(self, key: str) -> bool:
        """Focus a knob's control and scroll it into view (the `/` filter and the palette).

        Returns False when the knob's row is not mounted (yet).
        """
        try:
            row = self.row(key)
        except NoMatches:
            return False
        row.control.focus(scroll_visible=False)
        self.scroll_to_widget(row, animate=False, top=False)
        return True

    def show_config(self, config: EngineConfig, keep: Collection[str] = ()) -> None:
        """Set every control from ``config`` (attributes down; no messages posted).

        Rows named in ``keep`` hold invalid text the user has not corrected yet: it stays
        shown (marked) rather than being replaced by the config's value.
        """
        self.config = config
        for row in self.query(KnobRow):
            if row.knob.key not in keep:
                row.set_value(config.get(row.knob.key))

    def mark_availability(self, version: str | None, platform: str | None) -> int:
        """Mark knobs that do not apply to the target; returns how many are n/a.

        Choice lists follow the target too: the names the target vLLM version has
        (46 attention backends on 0.32, not the 67 of all versions), with those
        that do not run on the platform marked (``tuner.knobs.value_sets``).
        """
        self.target = (version, platform)
        for row in self.query(KnobRow):
            row.apply_target(version, platform)
        count = sum(not catalogue.available(k, version, platform).ok for k in catalogue.KNOBS)
        self.border_subtitle = f"{count} n/a on {platform or '?'}" if count else ""
        return count


def not_on_platform(knob: Knob, choices: tuple[str, ...], platform: str | None) -> frozenset[str]:
    """Values of ``knob`` that exist but do not run on ``platform`` (attention backends)."""
    if not platform or knob.extra.get("value_set") != "attention_backends":
        return frozenset()
    return frozenset(
        c for c in choices if (where := backend_platforms(c)) is not None and platform not in where
    )


def _dom_id(key: str) -> str:
    """Knob keys as DOM ids (they are already letters, digits, '-' and '_')."""
    return key.replace(".", "-")
