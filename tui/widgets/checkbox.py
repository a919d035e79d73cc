"""A checkbox whose state is its shape, not only its colour: ☑ checked, ☐ not.

Textual's Checkbox draws `X` in both states and tells them apart by colour
alone (issue 13, B12: all four export formats drew `X`, only two were
written) — unreadable on a monochrome terminal or to a colour-blind user.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Checkbox

CHECKED = "☑"
UNCHECKED = "☐"


class StateCheckbox(Checkbox):
    """A Checkbox drawn as ☑ / ☐ (space or Enter toggles, as Textual's)."""

    BUTTON_LEFT = ""
    BUTTON_RIGHT = ""

    @property
    def _button(self) -> Content:
        if self.value:
            return Content.styled(CHECKED, "bold $success")
        return Content.styled(UNCHECKED, "$text-muted")
