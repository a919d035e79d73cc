"""The key help screen (`?` or F1): every key of the app on one page.

It is rendered from :data:`tui.commands.ACTIONS` (the same table the
bindings, the footer and the palette read) plus the widgets' own keys, so it
cannot drift from what the keys really do.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.commands import ACTIONS, NAVIGATION, key_label


def key_table() -> Table:
    """Actions first (key, name, what it does), then moving around."""
    table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column("key", style="bold", no_wrap=True, width=15)
    table.add_column("what", ratio=1)
    table.add_row("[u]Actions[/u]", "")
    for spec in ACTIONS:
        table.add_row(key_label(spec.key), f"[b]{spec.title}[/b]  {spec.help}")
    table.add_row("", "")
    table.add_row("[u]Moving around[/u]", "")
    for key, what in NAVIGATION:
        table.add_row(key, what)
    return table


class KeyHelp(ModalScreen[None]):
    """Every key, closed with Esc, q, ? or F1."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help-dialog"):
            yield Static("Keys  (Esc closes)", classes="dialog-title")
            with VerticalScroll(id="help-body"):
                yield Static(key_table(), id="help-keys")
