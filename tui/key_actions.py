"""The app's own key actions: key help, jump to a knob, the engine log.

A mixin of :class:`tui.app.TunelabApp`. It imports the screens it opens; those
screens read the table of actions in :mod:`tui.commands`, which imports none
of them, so the import graph stays a DAG.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.app import App, SystemCommand
from textual.screen import Screen

from tui.commands import ACTIONS, jump_to_knob
from tui.screens.help import KeyHelp
from tui.screens.knob_jump import KnobJump
from tui.screens.log_view import LogView
from tui.widgets.knob_panel import KnobPanel, KnobRow


class KeyActions:
    """The app's key-help, knob-jump and engine-log actions (mixed into the App).

    Kept apart from the App class, which stays orchestration, and from the
    table of actions in :mod:`tui.commands`, which the screens pushed here
    read. The screens are imported when first opened (start-up time).
    """

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's palette commands, minus those that duplicate ours (Quit, Keys).

        Textual's "Keys" panel and "Quit" would sit beside tunelab's own Keys
        (the help screen) and Quit (which asks first and stops the engine).
        """
        ours = {spec.title for spec in ACTIONS}
        for command in App.get_system_commands(self, screen):  # type: ignore[arg-type]
            if command.title not in ours:
                yield command

    def action_help(self) -> None:
        app: Any = self
        if not isinstance(app.screen, KeyHelp):
            app.push_screen(KeyHelp())

    def action_find_knob(self) -> None:
        app: Any = self
        rows = app.main.query_one(KnobPanel).query(KnobRow)
        available = {row.knob.key: row.availability.ok for row in rows}

        def chosen(key: str | None) -> None:
            if key:
                # After the dialog is gone and the main screen got its focus back.
                app.call_after_refresh(jump_to_knob, app, key)

        app.push_screen(KnobJump(available), chosen)

    def action_engine_log(self) -> None:
        app: Any = self
        if not isinstance(app.screen, LogView):
            app.push_screen(LogView(app.main.run_panel.engine_log))
