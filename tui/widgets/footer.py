"""The footer with `q Quit` and `? Keys` always visible, at any width.

Textual's footer lays keys out left to right and clips what does not fit:
at 80 columns the last ones — `q Quit` among them — fell off (issue 13).
This footer docks Quit and Keys on the right (app.tcss), like Textual docks
the palette key, so the keys that get a user out or explain the others are
never the ones clipped; on a narrow terminal the palette key gives way
(`? Keys` lists ctrl+p).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PINNED = ("help", "quit")
ORDER = (*PINNED, "command_palette")
NARROW = 100  # below this many columns the palette key is hidden


class TunelabFooter(Footer):
    """A Footer whose Keys, Quit (and palette) entries sit together on the right edge."""

    def compose(self) -> ComposeResult:
        pinned: list[FooterKey] = []
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                action = widget.action.removeprefix("app.")
                if action in PINNED or widget.has_class("-command-palette"):
                    pinned.append(widget)
                    continue
            yield widget
        if pinned:
            pinned.sort(key=lambda key: ORDER.index(key.action.removeprefix("app.")))
            with HorizontalGroup(id="footer-pinned"):
                yield from pinned

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")
