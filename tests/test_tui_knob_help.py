"""The focused knob's help is read whole (issue 32): it was cut at 2 lines at any size."""

from __future__ import annotations

import pytest
from rich.console import Console
from rich.text import Text
from textual.widgets import Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.widgets.knob_panel import KnobPanel

MAX_LINES = 6  # app.tcss #knob-help: beyond this it scrolls


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_help_of_a_focused_knob_is_not_cut(size: tuple[int, int]) -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.main.query_one(KnobPanel)
        row = panel.row("attention-backend")  # help, source and the ⊘ values' reasons
        row.control.focus()
        help_box = app.main.query_one("#knob-help", Static)
        # The focus reaches the help box through the app's messages: on a loaded CI box
        # that took longer than a fixed 0.2 s pause (the rehearsal at 2361e7f saw the
        # placeholder), so wait for the row's help, bounded.
        await wait_for(
            pilot, lambda: row.help_text() in str(help_box.render()), 10, "the knob's help"
        )
        await pilot.pause()
        shown = str(help_box.render())
        assert row.help_text() in shown  # the whole help, as the row gives it
        width = help_box.scrollable_content_region.width
        lines = len(Text(shown).wrap(Console(width=width), width))
        assert lines > 2  # the case that was cut
        assert help_box.size.height >= lines  # the whole text is laid out ...
        box = app.main.query_one("#knob-help-box")
        assert box.size.height == min(lines, MAX_LINES)  # ... up to 6 lines, the rest scrolls
        assert box.virtual_size.height >= lines
        # Every ⊘ value is still named, each reason once (tuner.lab.checks.grouped_marks).
        for value in row.value_reasons:
            assert value in shown


def test_values_that_share_a_reason_are_named_once_with_it() -> None:
    from tuner.lab.checks import grouped_marks

    marks = {
        "FLASH_ATTN": "FLASH_ATTN exists only on cuda",
        "FLASH_ATTN_MLA": "FLASH_ATTN_MLA exists only on cuda",
        "TORCH_SDPA": 'runs CPU_ATTN ("Cannot use TORCH_SDPA backend on CPU.")',
        "CUSTOM": 'runs CPU_ATTN ("Cannot use CUSTOM backend on CPU.")',
        "ROCM_ATTN": "ROCM_ATTN exists only on rocm",
    }
    assert grouped_marks(marks) == [
        "⊘ FLASH_ATTN, FLASH_ATTN_MLA: exists only on cuda",
        '⊘ TORCH_SDPA, CUSTOM: runs CPU_ATTN ("Cannot use … backend on CPU.")',
        "⊘ ROCM_ATTN: exists only on rocm",
    ]
