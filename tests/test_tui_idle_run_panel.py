"""The idle Run panel shows the study's baseline and last result (issue 32).

It was a large empty box; a user coming back to a study after a restart sees
at once what the next run is compared with. The lines are checked against the
core's baseline (``Study.baseline``) and the result line the panel writes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.widgets import Static

from tests.support.tui_harness import services, settle, shown_lines, wait_for
from tui.app import TunelabApp
from tui.screens.main import result_line
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.lab.study import Study
from tuner.trials.model import PROBE_KIND, Trial
from tuner.trials.store import TrialStore


def _seed(path: Path) -> tuple[Trial, Trial]:
    with TrialStore(path) as store:
        made = []
        for seqs, tok_s in ((8, 900.0), (64, 1400.0)):
            trial = Trial(
                config=EngineConfig(model="m", engine={"max-num-seqs": seqs}),
                workload=Workload(),
                study="tui",
            )
            store.add(trial)
            store.save_result(trial, {"output_throughput": tok_s, "p99_ttft_ms": 12.0})
            made.append(store.get(trial.id))
        # Stored after them: a capacity probe (one load of a search) and a trial not finished;
        # neither is the study's last result.
        probe = Trial(
            config=EngineConfig(model="m", engine={"max-num-seqs": 4}),
            workload=Workload(),
            study="tui",
            tags={"kind": PROBE_KIND, "step": 1},
        )
        store.add(probe)
        store.save_result(probe, {"output_throughput": 3000.0, "p99_ttft_ms": 9.0})
        store.add(Trial(config=EngineConfig(model="m"), workload=Workload(), study="tui"))
    return made[0], made[1]


async def test_idle_panel_shows_the_core_s_baseline_and_the_last_result(tmp_path: Path) -> None:
    db = tmp_path / "trials.db"
    first, last = _seed(db)
    with TrialStore(db) as store:
        base = Study(store, "tui").baseline()
        newest = Study(store, "tui").last_result()
    assert base is not None and base.trial.id == first.id
    assert newest is not None and newest.id == last.id  # the core's choice: no probe, finished
    app = TunelabApp(services=replace(services(), store_path=db))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        figures = app.main.query_one("#run-figures", Static)
        await wait_for(pilot, lambda: "tok/s" in str(figures.render()), 10, "the idle lines")
        # What the 80×24 screen draws: each core line on a line of its own, cut with "…".
        want = [
            f"★ {result_line(base.trial)} · baseline: {base.how}",
            f"last {result_line(newest)}",
        ]
        drawn = shown_lines(figures)
        assert len(drawn) == 2, drawn
        assert "tok/s" in drawn[0] and "tok/s" in drawn[1]  # the figures survive the cut
        for line, full in zip(drawn, want, strict=True):
            assert full.startswith(line.removesuffix("…")), (line, full)
            assert line == full or line.endswith("…")
        assert "3000" not in str(figures.render())  # the probe is nobody's "last"
        assert "study tui" in str(app.main.run_panel.border_title)


async def test_an_empty_home_gets_no_store_from_the_idle_panel(tmp_path: Path) -> None:
    """Reading what the study holds never creates the store (a first start writes nothing)."""
    db = tmp_path / "trials.db"
    app = TunelabApp(services=replace(services(), store_path=db))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.pause(1.0)
        assert not db.exists()
        assert "tok/s" not in str(app.main.query_one("#run-figures", Static).render())
