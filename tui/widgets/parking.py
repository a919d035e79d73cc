"""Esc *parks* focus on a field's own row instead of sending it to the top (B11).

A knob row or a workload cell is a container with one control in it. Esc in
the control focuses the container itself: the app's single-key actions (r, a,
f ...) work again, Enter edits the control again, and Tab / Shift+Tab go on
from this field, not from the first widget of the screen. The container is
focusable only while parked, so Tab never stops on it twice.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.events import Blur
from textual.widget import Widget


class Parking(Widget):
    """Mixin for a one-control container (subclasses say which widget is :attr:`control`).

    List it after the container class (``class Row(Horizontal, Parking)``):
    Textual takes CSS type names (and so ``Horizontal``'s layout) from the
    first base's chain only.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "park", "Leave field", show=False, id="field.park"),
        Binding("enter", "edit", "Edit", show=False, id="field.edit"),
        Binding("tab", "walk(1)", "Next", show=False, id="field.next"),
        Binding("shift+tab", "walk(-1)", "Previous", show=False, id="field.previous"),
    ]

    @property
    def control(self) -> Widget:
        raise NotImplementedError

    @property
    def parked(self) -> bool:
        return self.has_focus

    def action_park(self) -> None:
        """Leave the control but keep the place: focus the container itself."""
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
        """Tab from a parked field: the next (or previous) focusable after its control."""
        screen = self.screen
        if step > 0:  # the field's own control comes next in the chain: start after it
            screen.set_focus(self.control, scroll_visible=False)
            screen.focus_next()
        else:
            screen.focus_previous()

    def _on_blur(self, event: Blur) -> None:
        self.can_focus = False
