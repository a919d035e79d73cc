"""Study progress: typed StudyStatus events (launches, waves, slots, ETA) and the CLI's bar.

The tracker is driven with a fake clock for the ETA model; a real A/B on two
fake GPUs (the study engine double) checks the events a study really sends.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support import study_cli
from tuner.bench.progress import BenchProgress
from tuner.bench.workload import Workload
from tuner.cli.study_output import StudyProgress, study_line
from tuner.config import EngineConfig
from tuner.studies.ab import run_ab
from tuner.studies.progress import StudyTracker, trial_label
from tuner.trials.events import (
    SlotState,
    StudyStatus,
    TrialDone,
    TrialProgress,
    TrialPruned,
    TrialStage,
)
from tuner.trials.model import Trial
from tuner.trials.slots import FORCE_ENV
from tuner.trials.store import TrialStore


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _trial(arm: str, repeat: int) -> Trial:
    return Trial(EngineConfig(model="m"), Workload(), arm=arm, repeat=repeat)


def test_tracker_counts_slots_and_models_the_eta() -> None:
    clock, events = _Clock(), []
    tracker = StudyTracker(events.append, clock)
    tracker.begin("s", "ab", total=6, slots=2, waves=3)
    a1, b1 = _trial("A", 0), _trial("B", 0)
    tracker.wave(0)
    tracker.slot_start("GPU 0", a1)
    tracker.slot_start("GPU 1", b1)
    tracker.observe(TrialStage(a1.id, "measuring"))
    status = events[-1]
    assert isinstance(status, StudyStatus)
    assert (status.running, status.wave, status.waves, status.eta_s) == (2, 1, 3, None)
    assert status.slots[0] == SlotState("GPU 0", a1.id, "A1", "measuring")
    clock.t += 60.0
    tracker.observe(TrialDone(a1))
    tracker.slot_end("GPU 0", a1)
    # One launch took 60 s; B1 has run 60 s (0 left), 4 queued on 2 slots: 4 * 60 / 2.
    assert events[-1].eta_s == pytest.approx(120.0)
    assert events[-1].done == 1 and events[-1].elapsed_s == pytest.approx(60.0)
    clock.t += 30.0
    tracker.observe(TrialPruned(b1, "pruned: ..."))
    tracker.slot_end("GPU 1", b1)
    last = events[-1]
    assert (last.done, last.pruned, last.running) == (2, 1, 0)
    # Mean launch (60 + 90) / 2 = 75 s; 4 queued on 2 slots.
    assert last.eta_s == pytest.approx(150.0)


def test_tracker_throttles_progress_but_never_stage_changes() -> None:
    clock, events = _Clock(), []
    tracker = StudyTracker(events.append, clock)
    tracker.begin("s", "sweep", total=2, slots=1)
    trial = Trial(EngineConfig(model="m"), Workload(), tags={"values": {"max-num-seqs": 8}})
    assert trial_label(trial) == "max-num-seqs=8"
    tracker.slot_start("engine", trial)
    before = len(events)
    clock.t += 1.0
    for i in range(5):
        tracker.observe(TrialProgress(trial.id, BenchProgress("running", i, 0, 10, 0.1 * i, 1.0)))
    assert len(events) == before + 1  # one a second, however many progress events
    tracker.observe(TrialStage(trial.id, "stopping"))
    assert len(events) == before + 2
    assert events[-1].slots[0].requests_done == 4 and events[-1].slots[0].stage == "stopping"
    # No waves given: the round of slot-fulls.
    assert (events[-1].wave, events[-1].waves) == (1, 2)


def test_the_cli_bar_shows_the_studys_figures() -> None:
    progress = StudyProgress("A/B", 99)
    trial = _trial("B", 1)
    status = StudyStatus(
        "s",
        "ab",
        3,
        8,
        2,
        1,
        0,
        2,
        4,
        (SlotState("GPU 1", trial.id, "B2", "measuring"),),
        75.0,
        130.0,
        "look 1 after wave 1: continue",
    )
    progress(status)
    task = progress.display.progress.tasks[0]
    assert (task.total, task.completed, task.fields["eta"]) == (8, 3, 130.0)
    assert "wave 2/4" in task.description and "1 pruned" in task.description
    assert "look 1" in study_line("A/B", status)


def test_a_parallel_ab_reports_waves_slots_and_an_eta(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    load = Workload(input_len=16, output_len=16, num_prompts=16, concurrency=8, warmup_requests=0)
    base = EngineConfig(model="engine-double")
    events: list = []
    with TrialStore(tmp_path / "t.db") as store:
        runner = study_cli._make_runner(store, events.append, 60.0)
        runner.options["guard"] = False
        a, b = base.with_values({"max-num-seqs": 1}), base.with_values({"max-num-seqs": 8})
        asyncio.run(run_ab(a, b, load, runner, repeats=2, study="p"))
    statuses = [e for e in events if isinstance(e, StudyStatus)]
    assert statuses and all(s.kind == "ab" and s.total == 4 for s in statuses)
    assert statuses[-1].done == 4 and statuses[-1].running == 0
    assert {s.waves for s in statuses} == {2} and {s.wave for s in statuses} >= {1, 2}
    # Both arms on a slot at once, on different GPUs.
    both = [s for s in statuses if s.running == 2]
    assert both
    assert {(x.slot, x.label[0]) for x in both[0].slots} in (
        {("GPU 0", "A"), ("GPU 1", "B")},
        {("GPU 0", "B"), ("GPU 1", "A")},
    )
    assert any(s.eta_s is not None for s in statuses if s.done >= 2 and s.done < 4)
    done_ids = [e.trial.id for e in events if isinstance(e, TrialDone)]
    assert len(done_ids) == 4
