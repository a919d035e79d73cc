"""The Run panel shows every trial of a study that runs them side by side (issue 15).

Two fake GPUs (``TUNELAB_FORCE_GPU_COUNT=2``) and the study engine double: a
two-point sweep from the TUI runs both points at once on the one scheduler.
What the panel lists is checked against the core's own ``StudyStatus``
(the tracker's slot states), not against a copy of the scheduling. The GPU
panel (recorded amdsmi FAKE, 8 GPUs) says which slot holds which GPU, from
the same status (``StudyStatus.by_gpu``), and which processes on a GPU are not
tunelab's engines (``tuner.telemetry.clean.foreign``; issue 18).
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Input, Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished, RunEvent
from tui.widgets.gpu_panel import CELL_WIDTH, INDEX_STYLE, GpuGrid, GpuPanel
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.engine import running
from tuner.studies.progress import StudyTracker
from tuner.telemetry import clean
from tuner.telemetry.types import GpuProcess, GpuSnapshot
from tuner.trials import events as ev
from tuner.trials.model import Trial
from tuner.trials.slots import FORCE_ENV


async def test_run_panel_lists_every_running_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    seen: list[Any] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"input_len": "32", "output_len": "16", "num_prompts": "16"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        panel = app.main.run_panel
        shown: list[tuple[ev.StudyStatus, str]] = []
        original = panel.study_status

        def record(status: ev.StudyStatus) -> None:
            original(status)
            shown.append((status, str(panel.query_one("#run-slots", Static).render())))

        panel.study_status = record  # type: ignore[method-assign]
        assert app.jobs.submit_sweep("max-num-seqs=2,4") is not None
        await wait_for(
            pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 120, "the sweep"
        )
        both = [(s, text) for s, text in shown if sum(x.trial_id is not None for x in s.slots) == 2]
        assert both, [s.slots for s, _ in shown]  # the core ran the two points at once
        status, text = both[0]
        assert f"{status.running} running on 2 slots" in text
        for slot in status.slots:
            assert slot.trial_id is not None
            assert f"{slot.label} {slot.trial_id[:8]} {slot.stage}" in text, (slot, text)


async def test_gpu_panel_shows_the_slots_and_the_processes_that_are_not_tunelabs() -> None:
    """Recorded amdsmi FAKE (8 GPUs, a process on some): foreign processes, then a study's slots.

    The slots come from the core's tracker (the StudyStatus a study emits), posted
    the way a running job posts its events; the line shows ``by_gpu()`` of it.
    """
    app = TunelabApp(services=services(gpus=True, rate_hz=5.0))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(GpuPanel)
        await wait_for(pilot, lambda: bool(panel.snapshots), 10, "GPU snapshots")
        node = panel.query_one("#gpu-node", Static)
        line = str(node.render())
        own = running.engine_pids()
        with_others = 0
        for snap in panel.snapshots:
            others = clean.foreign(snap.processes, own)
            style = str(panel.cell_text(snap.index).spans[0].style)
            if others:
                with_others += 1
                assert f"GPU {snap.index}: {len(others)} other process" in line, line
                assert all(f"{p.pid} {p.name}" in line for p in others[:3])
                assert style == INDEX_STYLE["foreign"]
            else:
                assert f"GPU {snap.index}:" not in line
                assert style == "bold"
        assert with_others  # the recording has processes to show
        # A study takes GPUs 6 and 7 (a TP=2 slot): the core's status, by GPU.
        tracker = StudyTracker(emit=lambda e: statuses.append(e))
        statuses: list[ev.TrialEvent] = []
        trial = Trial(EngineConfig(model="m"), Workload(), study="s", arm="A", repeat=0)
        tracker.begin("s", "ab", 2, slots=4)
        tracker.slot_start("GPU 6,7", trial, gpus=(6, 7))
        status = statuses[-1]
        assert isinstance(status, ev.StudyStatus)
        assert sorted(status.by_gpu()) == [6, 7]
        app.main.post_message(RunEvent(1, status))
        await pilot.pause(0.3)
        line = str(node.render())
        assert f"GPU 6,7 A1 {trial.id[:8]} queued" in line, line
        for index in (6, 7):
            if not clean.foreign(panel.snapshots[index].processes, own):
                assert str(panel.cell_text(index).spans[0].style) == INDEX_STYLE["busy"]
        tracker.slot_end("GPU 6,7", trial)
        app.main.post_message(RunEvent(1, statuses[-1]))
        await pilot.pause(0.3)
        assert "GPU 6,7" not in str(node.render())


def test_foreign_leaves_out_the_engines_own_processes() -> None:
    procs = (GpuProcess(10, "vllm"), GpuProcess(11, "python3"))
    assert clean.foreign(procs, {10}) == (procs[1],)
    assert clean.foreign(procs, {10, 11}) == ()
    assert clean.foreign(None, {10}) is None


async def test_gpu_grid_draws_each_cell_in_its_column_and_follows_the_width() -> None:
    """Recorded amdsmi FAKE, 8 GPUs: one widget draws every cell (issue 13's idle CPU).

    What the terminal shows (the grid's drawn lines) is checked against each
    GPU's cell as the panel holds it, at 160 columns (4 per row) and at 80 (2 per
    row); the tooltip follows the pointer from cell to cell.
    """
    app = TunelabApp(services=services(gpus=True, rate_hz=5.0))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(GpuPanel)
        await wait_for(pilot, lambda: bool(panel.snapshots), 10, "GPU snapshots")
        await pilot.pause(0.3)
        grid = panel.query_one("#gpu-grid", GpuGrid)
        for width, columns in ((160, 4), (80, 2)):
            await pilot.resize_terminal(width, 48)
            await pilot.pause(0.3)
            rows = -(-8 // columns)
            assert grid.size.height == rows, (width, grid.size)
            for index in range(8):
                line = grid.render_line(index // columns).text
                start = (index % columns) * CELL_WIDTH
                drawn = line[start : start + CELL_WIDTH - 1].rstrip()
                assert drawn == panel.cell_text(index).plain.rstrip(), (width, index, line)
        await pilot.resize_terminal(160, 48)
        await pilot.pause(0.3)
        for index in (0, 5, 7):
            await pilot.hover(grid, offset=((index % 4) * CELL_WIDTH + 2, index // 4))
            await pilot.pause(0.1)
            assert str(grid.tooltip).startswith(f"GPU {index}:"), (index, grid.tooltip)


async def test_gpu_grid_redraws_its_cached_rows_on_a_theme_change() -> None:
    """A reading that does not change must not keep the old theme's colours.

    The grid caches each drawn row with its base style; an idle GPU's cell stays
    the same tick after tick, so only the style update can make it redraw.
    """
    from textual.app import App, ComposeResult

    class One(App):
        def compose(self) -> ComposeResult:
            yield GpuGrid(id="g")

    app = One()
    async with app.run_test(size=(100, 4)) as pilot:
        grid = app.query_one(GpuGrid)
        grid.set_count(1)
        grid.show(GpuSnapshot(index=0, name="MI355X", gfx_activity=0.0), [0.0])
        grid.repaint_changed()
        await pilot.pause()
        seen = set()
        for theme in ("textual-light", "textual-dark"):
            app.theme = theme
            await pilot.pause(0.2)
            base = grid.visual_style.rich_style.bgcolor
            line = grid.render_line(0)
            assert {s.style.bgcolor for s in line if s.text.isspace()} == {base}, theme
            seen.add(base)
        assert len(seen) == 2, "the two themes gave one background: the test shows nothing"
