"""The workload panel under 76 columns, and Esc in one of its fields (issue 13).

Below 76 columns three label+input pairs per row no longer fit: the inputs
were squeezed and clipped until ``1024`` read as another number. The panel
now re-flows to two or one pair per row. Esc in a field used to send focus
to the knob panel, so the next Tab restarted at the top; it parks on the
field like a knob row does.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.widgets.workload_panel import WorkloadPanel


@pytest.mark.parametrize("width", [50, 60, 70, 75], ids=lambda w: f"{w}x30")
async def test_workload_values_stay_whole_under_76_columns(width: int) -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(width, 30)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(WorkloadPanel)
        for box in panel.query(Input):
            box.value = "1024" if box.id != "wl-slo" else box.value
        await pilot.pause(0.2)
        for box in panel.query(Input):
            if box.id == "wl-slo":
                continue  # free text: it scrolls like any text field
            assert box.content_region.width >= len(box.value) + 1, (box.id, box.region)
            # The whole input is inside the panel, and no two inputs share a cell.
            assert panel.content_region.contains_region(box.region), (box.id, box.region)
        regions = [b.region for b in panel.query(Input)]
        assert all(not a.overlaps(b) for i, a in enumerate(regions) for b in regions[i + 1 :])
        assert app.screen.region.contains_region(panel.region)


async def test_esc_in_a_workload_field_keeps_focus_on_that_field() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        box = app.main.query_one("#wl-num_prompts", Input)
        box.focus()
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        focused = app.focused
        assert focused is not None and box in focused.walk_children(with_self=True)
        assert not isinstance(focused, Input)  # single-key actions work again
        await pilot.press("enter")  # edits the same field again
        await pilot.pause()
        assert app.focused is box
        await pilot.press("escape", "tab")  # and Tab goes on from it, not from the top
        await pilot.pause()
        assert app.focused is app.main.query_one("#wl-request_rate", Input)
