"""Keyboard reach (issue 13, B11): any knob in a few keys, focus that stays, key help.

Each test drives the real app with the pilot, presses keys as a user would
and checks what has focus (or what the screen shows) against the catalogue.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.command import CommandPalette
from textual.system_commands import SystemCommandsProvider
from textual.widgets import Input, Select, Static
from textual.widgets._footer import FooterKey

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.commands import ACTIONS, TunelabCommands, key_label
from tui.screens.help import KeyHelp
from tui.screens.knob_jump import KnobJump, match_knobs
from tui.widgets.knob_panel import KnobPanel, KnobRow


def _knob_of(app: TunelabApp) -> str | None:
    """The knob whose row holds the focus (or is the focus), None elsewhere."""
    focused = app.focused
    if focused is None:
        return None
    row = next((n for n in focused.ancestors_with_self if isinstance(n, KnobRow)), None)
    return row.knob.key if row else None


async def _keys(pilot: Any, text: str) -> None:
    names = {"-": "minus", "_": "underscore", " ": "space"}
    for ch in text:
        await pilot.press(names.get(ch, ch))


async def test_slash_filter_jumps_to_a_knob_in_two_keys_plus_its_name() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.pause()
        assert isinstance(app.screen, KnobJump)
        await _keys(pilot, "max-num-s")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.screen is app.main
        assert _knob_of(app) == "max-num-seqs"
        panel = app.main.query_one(KnobPanel)
        row = panel.row("max-num-seqs")
        assert app.focused is row.control
        # Scrolled into view: the row lies inside the panel's visible region.
        assert panel.region.contains_region(row.region), (panel.region, row.region)


def test_knob_filter_ranks_substrings_first_and_finds_fuzzy_abbreviations() -> None:
    assert [k.key for k in match_knobs("max-num")][:2] == [
        "max-num-seqs",
        "max-num-batched-tokens",
    ]
    assert match_knobs("max-num-s")[0].key == "max-num-seqs"
    assert "max-num-seqs" in [k.key for k in match_knobs("mxnmsq")]
    assert match_knobs("zzzzqqq") == []


async def test_palette_jumps_to_a_knob_and_lists_each_title_once() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        provider = TunelabCommands(app.screen)
        hits = [hit async for hit in provider.search("max-num")]
        texts = [str(h.text or h.match_display) for h in hits]
        assert "Knob: max-num-seqs" in texts, texts
        # Titles across tunelab's and Textual's providers: none twice (Theme, Quit, Keys were).
        system = SystemCommandsProvider(app.screen)
        titles = [str(h.display) for h in [h async for h in system.discover()]]
        titles += [str(h.display).split(" (")[0] for h in [h async for h in provider.discover()]]
        assert len(titles) == len(set(titles)), sorted(titles)
        # Through the real palette: ctrl+p, the name, Enter.
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await _keys(pilot, "max-num-seqs")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.screen is app.main
        assert _knob_of(app) == "max-num-seqs"


async def test_escape_keeps_the_place_and_tab_goes_on_from_there() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(KnobPanel)
        rows = list(panel.query(KnobRow))
        keys = [r.knob.key for r in rows]
        i = keys.index("max-num-seqs")
        panel.focus_knob("max-num-seqs")
        await pilot.pause()
        await _keys(pilot, "12")
        await pilot.press("escape")
        await pilot.pause()
        assert _knob_of(app) == "max-num-seqs"  # parked on its row, not sent to the top
        assert app.focused is rows[i]
        await pilot.press("tab")
        await pilot.pause()
        assert _knob_of(app) == keys[i + 1], (_knob_of(app), keys[i + 1])
        # Back, Esc, Shift+Tab: the knob before.
        panel.focus_knob("max-num-seqs")
        await pilot.press("escape", "shift+tab")
        await pilot.pause()
        assert _knob_of(app) == keys[i - 1]
        # Enter on a parked row edits it again.
        panel.focus_knob("max-num-seqs")
        await pilot.press("escape", "enter")
        await pilot.pause()
        assert app.focused is panel.row("max-num-seqs").control
        assert isinstance(app.focused, Input)


async def test_closing_a_dropdown_keeps_the_knob_and_tab_goes_on() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(KnobPanel)
        keys = [r.knob.key for r in panel.query(KnobRow)]
        key = next(k for k in keys if isinstance(panel.row(k).control, Select))
        i = keys.index(key)
        panel.focus_knob(key)
        await pilot.press("enter")  # opens the dropdown
        await pilot.pause()
        assert panel.row(key).control.expanded  # type: ignore[union-attr]
        await pilot.press("escape")  # closes it
        await pilot.pause()
        assert _knob_of(app) == key
        await pilot.press("escape")  # leaves the field: parked
        await pilot.pause()
        assert _knob_of(app) == key
        await pilot.press("tab")
        await pilot.pause()
        assert _knob_of(app) == keys[i + 1]


async def test_question_mark_and_f1_open_the_key_help_with_every_action() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, KeyHelp), key
            static = app.screen.query_one("#help-keys", Static)
            console = Console(width=static.size.width or 90, record=True, file=io.StringIO())
            console.print(static.content)
            lines = console.export_text().splitlines()
            for spec in ACTIONS:
                label = key_label(spec.key)
                assert any(
                    line.strip().startswith(label) and spec.title in line for line in lines
                ), (label, spec.title)
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is app.main


async def test_quit_and_keys_stay_in_the_footer_at_80x24() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)

        def footer() -> dict[str, FooterKey]:
            return {k.action.removeprefix("app."): k for k in app.main.query(FooterKey)}

        # The footer recomposes after a refresh whenever the bindings change.
        await wait_for(
            pilot, lambda: footer().get("quit") is not None and footer()["quit"].region.width > 0
        )
        keys = footer()
        for action in ("quit", "help"):
            region = keys[action].region
            assert region.width > 0 and region.right <= 80 and region.y == 23, (action, region)
        assert keys["quit"].region.x != keys["help"].region.x
