"""The footer with `q Quit` and `? Keys` always visible, at any width.

Textual's footer lays keys out left to right and clips what does not fit:
at 80 columns the last ones — `q Quit` among them — fell off (issue 13).
This footer docks Quit and Keys on the right (app.tcss), like Textual docks
the palette key, so the keys that get a user out or explain the others are
never the ones clipped; on a narrow terminal the palette key gives way
(`? Keys` lists ctrl+p). The keys on the left that the pinned group would
cover are hidden whole, from the first that does not fit: a label cut
mid-word under `? Keys` read as one word ("l Log? Keys", issue 32).
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
FIT_TRIES = 20  # looks at the layout, 50 ms apart, before a fit gives up until the next resize


class TunelabFooter(Footer):
    """A Footer whose Keys, Quit (and palette) entries sit together on the right edge."""

    _tries = FIT_TRIES

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
        self._tries = FIT_TRIES
        self.call_after_refresh(self._fit)

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")
        for key in self._left_keys():
            key.display = True
        self._tries = FIT_TRIES
        self.call_after_refresh(self._fit)

    def _left_keys(self) -> list[FooterKey]:
        return [
            k for k in self.query(FooterKey) if k.parent is None or k.parent.id != "footer-pinned"
        ]

    def _fit(self) -> None:
        """Hide, whole, every left key from the first one the pinned group covers."""
        groups = self.query("#footer-pinned")
        if not groups:
            return
        keys = self._left_keys()
        edge = groups.first().region.x
        if edge <= 0 or any(k.display and not k.region.width for k in keys):
            # Not laid out yet (a recompose), or the screen is not shown: look again a few
            # times, never for ever (a footer under another screen must not wake the app).
            self._tries -= 1
            if self._tries > 0:
                self.set_timer(0.05, self._fit)
            return
        covered = False
        for key in keys:
            # Clipped (its visible part narrower than itself) or touching the pinned group.
            clipped = key.region.width < key.outer_size.width
            covered = covered or clipped or key.region.right >= edge
            if covered:
                key.display = False
