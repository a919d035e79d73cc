"""Long lines are read whole (issue 32): the engine log view and the Run panel's events wrap.

vLLM's ``non-default args`` line runs to hundreds of characters; the log view
cut it at the screen's edge with no wrap, and the Run panel wrapped its events
at 78 columns (RichLog's default minimum) inside a 36-column box, so the middle
of a long event was never on screen.
"""

from __future__ import annotations

from textual.app import App
from textual.widgets import RichLog

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.screens.log_view import LogView
from tui.widgets.run_panel import EngineLog, RunPanel

LONG = "INFO non-default args: " + ", ".join(f"'knob_{i}': {i * 7}" for i in range(30))


def _text(log: RichLog) -> str:
    return "".join(strip.text for strip in log.lines)


async def test_the_log_view_wraps_a_long_line_and_w_unwraps_it() -> None:
    engine_log = EngineLog()
    engine_log.add(LONG)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(LogView(engine_log))

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        view = app.screen.query_one("#log-lines", RichLog)
        assert len(view.lines) > 1 and all(len(s.text) <= 80 for s in view.lines)
        assert _text(view).replace(" ", "") == LONG.replace(" ", "")
        await pilot.press("w")
        await pilot.pause()
        assert len(view.lines) == 1 and view.lines[0].text.rstrip() == LONG
        assert "unwrapped" in str(app.screen.query_one("#log-header").render())


async def test_run_panel_events_wrap_inside_the_panel_at_80x24() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(RunPanel)
        log = panel.query_one("#run-log", RichLog)
        panel.event(LONG)
        await pilot.pause()
        width = log.scrollable_content_region.width
        assert all(len(strip.text.rstrip()) <= width for strip in log.lines)
        assert LONG.replace(" ", "") in _text(log).replace(" ", "")
