"""Several findings carry a fix: the user picks which one ``f`` applies.

Applying "the first" silently would change knobs the user did not choose;
each option shows the finding and the values its fix sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.widgets.findings_panel import fix_text
from tuner.rules import Finding


class FixPicker(ModalScreen[Finding | None]):
    """A list of the findings with a fix; Enter applies the highlighted one, Esc none."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="fix_picker.cancel")
    ]

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__()
        self.findings = list(findings)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Apply which fix? (Enter applies, Esc cancels)", classes="dialog-title")
            yield OptionList(
                *(
                    Option(f"{fix_text(f.fix)}  ← {f.message}", id=str(i))
                    for i, f in enumerate(self.findings)
                ),
                id="fix-options",
            )

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.findings[int(event.option.id or 0)])

    def action_cancel(self) -> None:
        self.dismiss(None)
