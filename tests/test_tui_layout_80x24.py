"""At 80×24 (the smallest supported terminal) no workload value is cut into another value.

Issue 13: with less room (Textual's key panel open beside the screen) the
workload inputs shrank until ``128`` showed as ``12`` and ``32`` as ``3`` — a
different, plausible value. Each input must be wide enough for its whole
text and the cursor (app.tcss gives them a minimum width); the palette's
"Keys" now opens tunelab's key help screen instead of that side panel.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.widgets.workload_panel import WorkloadPanel


@pytest.mark.parametrize("size", [(80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_workload_values_are_never_cut_into_other_values(size: tuple[int, int]) -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.main.query_one(WorkloadPanel)
        for box in panel.query(Input):
            if box.id == "wl-slo":
                continue  # free text, empty by default; it scrolls like any text field
            box.value = "1024"
        await pilot.pause(0.2)
        for box in panel.query(Input):
            if box.id == "wl-slo":
                continue
            width = box.content_region.width
            assert width >= len(box.value) + 1, (box.id, box.value, width)
            # And the whole input is on screen, not clipped by the panel.
            assert panel.content_region.contains_region(box.region), (box.id, box.region)
