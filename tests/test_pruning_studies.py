"""Pruning end to end: sweeps and Optuna searches stop a dominated point, on the study engine double.

The double's speed follows ``max-num-seqs`` (10 ms per token here, so a run
lasts seconds): at concurrency 8, ``max-num-seqs=1`` delivers an eighth of
``max-num-seqs=8``. That point must be stopped a short window into its run,
recorded as pruned (engine stopped, no results kept as a measurement), and
never become the best; points within the noise of each other must not be.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import optuna
import pytest

from tests.support import study_cli
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.studies.pruning import is_pruned
from tuner.studies.search import run_search
from tuner.studies.space import Space, parse_param
from tuner.studies.sweep import run_sweep
from tuner.trials.events import TrialPruned
from tuner.trials.model import TrialStatus
from tuner.trials.slots import FORCE_ENV
from tuner.trials.store import TrialStore

# 125 requests of 16 tokens: ~2.5 s at max-num-seqs=8, ~20 s at max-num-seqs=1.
LOAD = Workload(input_len=16, output_len=16, num_prompts=125, concurrency=8, warmup_requests=0)
BASE = EngineConfig(model="engine-double")


@pytest.fixture
def slow_double(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "10")
    monkeypatch.setenv(FORCE_ENV, "0")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _runner(store: TrialStore, events: list) -> object:  # type: ignore[type-arg]
    runner = study_cli._make_runner(store, events.append, 60.0)
    runner.options["guard"] = False  # the output guard's probes are not the subject here
    return runner


def test_sweep_prunes_the_dominated_point_and_keeps_the_close_ones(
    slow_double: None, tmp_path: Path
) -> None:
    events: list = []
    with TrialStore(tmp_path / "t.db") as store:
        runner = _runner(store, events)
        param = parse_param("max-num-seqs=8,16,1")
        report = asyncio.run(run_sweep(BASE, LOAD, [param], runner, study="prune"))  # type: ignore[arg-type]
        trials = {t.config.engine["max-num-seqs"]: t for t in store.list(study="prune")}
    assert set(trials) == {8, 16, 1}
    slow = trials[1]
    assert is_pruned(slow), (slow.status, slow.failure_reason)
    assert slow.status is TrialStatus.INTERRUPTED
    assert slow.failure_reason.startswith("pruned: interim")
    assert slow.tags["pruned"]["gap"] > 0.5
    # Stopped a short window in, not measured to the end (~20 s).
    assert slow.tags["pruned"]["window_s"] < 6.0
    assert slow.timings.get("bench_s", 0.0) < 8.0
    assert slow.engine_pid is None  # its engine was stopped
    for value in (8, 16):  # within the noise of each other: both measured to the end
        assert trials[value].status is TrialStatus.DONE, trials[value].failure_reason
        assert not is_pruned(trials[value])
    assert report.best_values["max-num-seqs"] in (8, 16)
    point = next(p for p in report.steps[0].points if p.value == 1)
    assert point.to_dict("output_throughput")["pruned"] == [slow.id]
    assert [e.trial.id for e in events if isinstance(e, TrialPruned)] == [slow.id]


def test_sweep_with_pruning_off_measures_every_point(slow_double: None, tmp_path: Path) -> None:
    quick = Workload(input_len=16, output_len=16, num_prompts=40, concurrency=8, warmup_requests=0)
    with TrialStore(tmp_path / "t.db") as store:
        runner = _runner(store, [])
        param = parse_param("max-num-seqs=8,1")
        asyncio.run(run_sweep(BASE, quick, [param], runner, study="all", prune=False))  # type: ignore[arg-type]
        statuses = {t.config.engine["max-num-seqs"]: t.status for t in store.list(study="all")}
    assert statuses == {8: TrialStatus.DONE, 1: TrialStatus.DONE}


def test_tune_prunes_through_optunas_pruner(slow_double: None, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    space = Space([parse_param("max-num-seqs=8,1")])
    with TrialStore(tmp_path / "t.db") as store:
        runner = _runner(store, [])
        # Seed 10 asks 8 first, then 1 (TPE's random start-up points, one slot).
        report = asyncio.run(
            run_search(BASE, LOAD, space, runner, n_trials=2, study="s", storage=url, seed=10)  # type: ignore[arg-type]
        )
        trials = store.list(study="s")
    values = [t.config.engine["max-num-seqs"] for t in sorted(trials, key=lambda t: t.created_at)]
    assert values == [8, 1], values
    slow = next(t for t in trials if t.config.engine["max-num-seqs"] == 1)
    assert is_pruned(slow) and report.stopped_early == 1 and report.measured == 1
    study = optuna.load_study(study_name="s", storage=url)
    states = {t.user_attrs["tunelab_trial_id"]: t for t in study.trials}
    frozen = states[slow.id]
    assert frozen.state is optuna.trial.TrialState.PRUNED
    assert frozen.user_attrs["stopped_early"] is True
    assert len(frozen.intermediate_values) >= 4  # reported as it ran, judged on several readings
    assert report.best and report.best[0]["params"] == {"max-num-seqs": 8}


def test_a_search_skips_rule_invalid_points_without_an_engine_and_completes(
    tmp_path: Path,
) -> None:
    """Optuna's points that the rules refuse (max-model-len 16 below the workload) are recorded
    skipped with no engine started; the valid ones are measured (on the CPU engine until stop
    33; the study runner is the same one, so the engine double decides it in seconds)."""
    from tuner.studies.space import parse_constraint

    events: list = []
    space = Space(
        [parse_param("max-num-seqs=4,64"), parse_param("max-model-len=16,2048")],
        [parse_constraint("p99_ttft_ms<=60000")],
    )
    load = Workload(input_len=32, output_len=16, num_prompts=16, concurrency=16, warmup_requests=1)
    with TrialStore(tmp_path / "t.db") as store:
        runner = _runner(store, events)
        report = asyncio.run(
            run_search(BASE, load, space, runner, n_trials=3, study="search", seed=0)  # type: ignore[arg-type]
        )
        trials = store.list("search")
    assert report.measured == 3 and report.failed == 0
    skipped = [t for t in trials if str(t.status) == "skipped"]
    # Seed 0 proposes max-model-len 16 twice (seed 3, the engine test's, proposed it never).
    assert skipped and len(skipped) == report.pruned
    assert all(t.config.engine["max-model-len"] == 16 for t in skipped)
    assert all(t.log_path is None for t in skipped), (
        "an engine was started for a rule-invalid point"
    )
    assert report.best and report.best[0]["tunelab_trial_id"] in {t.id for t in trials}
