"""Knobs that apply to the target come first (issue 32): in the panel and in `/`.

On the CPU engine every AITER knob is ⊘; in catalogue order their group came
first, so at 80×24 the visible knob rows were all knobs that do nothing. The
order is the core's (:func:`tuner.knobs.group_order`); the panel and the
jump dialog are checked against it, and the preview target (`g`) reorders them.
"""

from __future__ import annotations

from textual.widgets import OptionList

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.screens.knob_jump import KnobJump
from tui.widgets.knob_panel import KnobPanel, KnobRow
from tuner import knobs as catalogue


def _group_ids(panel: KnobPanel) -> list[str]:
    return [str(child.id) for child in panel.children]


def _expected(version: str | None, platform: str | None) -> list[str]:
    return [f"group-{g.replace('.', '-')}" for g in catalogue.group_order(version, platform)]


async def test_applicable_groups_come_first_and_follow_the_target() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(KnobPanel)
        version, platform = panel.target or (None, None)
        assert platform == "cpu"
        assert _group_ids(panel) == _expected(version, platform)
        aiter = next(g for g, ks in catalogue.groups().items() if ks[0].key.startswith("VLLM_ROCM"))
        live = [
            g
            for g, ks in catalogue.groups().items()
            if any(catalogue.available(k, version, platform).ok for k in ks)
        ]
        assert f"group-{aiter}" in _group_ids(panel)[len(live) :]  # all ⊘ on cpu: after them
        # In each group the rows that apply come before the ⊘ ones; the first row applies.
        rows = list(panel.query(KnobRow))
        assert rows and not rows[0].has_class("-na")
        for block in panel.children:
            na = [row.has_class("-na") for row in block.query_children(KnobRow)]
            assert na == sorted(na), (block.id, na)
        # `/` with nothing typed: every applicable knob before any n/a one.
        await pilot.press("slash")
        await pilot.pause()
        assert isinstance(app.screen, KnobJump)
        options = app.screen.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        ok = [catalogue.available(catalogue.get(k), version, platform).ok for k in ids if k]  # type: ignore[arg-type]
        assert ok == sorted(ok, reverse=True) and ok[0] and not ok[-1]
        await pilot.press("escape")
        await pilot.pause()
        # A ROCm preview: the AITER group applies and goes back to its catalogue place.
        panel.mark_availability(version, "rocm")
        await pilot.pause()
        assert _group_ids(panel) == _expected(version, "rocm")
        assert _group_ids(panel).index(f"group-{aiter}") < len(live)
