"""Capacity on the study engine double: one engine per launch, the boundary the double's physics sets.

The double (tests/support/study_engine_double.py) lets ``max-num-seqs`` streams
generate at once and queues the rest, as vLLM's scheduler does; a queued
request waits for a whole generation before its first token. So with 25 ms
per token and 16 tokens, p99 TTFT is ~25-60 ms up to max-num-seqs users and
>= ~400 ms beyond (all requests start together and are equally long, so they
finish in waves): the capacity at ``p99_ttft_ms<=200`` is max-num-seqs, with
margins on both sides wide enough for a loaded CI box.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.study_cli import double_command
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.studies.capacity import Grid
from tuner.studies.capacity_run import probe_workload, run_capacity
from tuner.studies.executor import TrialRunner
from tuner.studies.slo import parse_slo
from tuner.trials.context import RunContext
from tuner.trials.model import TrialStatus
from tuner.trials.store import TrialStore

REPO = Path(__file__).resolve().parents[1]
SLO = parse_slo("p99_ttft_ms<=200")
BASE = Workload(input_len=16, output_len=16, num_prompts=4, warmup_requests=0)


@pytest.fixture
def double_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "starts.jsonl"
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "25")
    monkeypatch.setenv("DOUBLE_START_LOG", str(log))
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))
    return log


def _runner(store: TrialStore) -> TrialRunner:
    context = RunContext(Target(note="study engine double"), None, [])
    return TrialRunner(store, None, {"startup_timeout": 60, "context": context}, double_command)


# One value here: test_capacity_ab_between_two_max_num_seqs holds capacity to max-num-seqs
# at 3 and 6 through the CLI, on two launches each.
@pytest.mark.parametrize("seqs", [3])
def test_capacity_is_max_num_seqs_on_each_launch(
    seqs: int, double_env: Path, tmp_path: Path
) -> None:
    config = EngineConfig(model="engine-double", engine={"max-num-seqs": seqs})
    grid = Grid("concurrency", 1, 1, 64)
    with TrialStore(tmp_path / "trials.db") as store:
        report = asyncio.run(
            run_capacity(config, BASE, SLO, grid, _runner(store), launches=2, probes=7, study="cap")
        )
        trials = store.list("cap")
    assert [lc.capacity for lc in report.launches] == [seqs, seqs]
    assert all(lc.converged and lc.failing == seqs + 1 for lc in report.launches)
    assert report.summary().startswith(f"max concurrency meeting p99_ttft_ms<=200: {seqs} [")
    # One engine per launch, not one per probe.
    assert len(double_env.read_text().splitlines()) == 2
    # Every probe is a stored trial measured at its planned load.
    assert len(trials) == 14 and all(t.status is TrialStatus.DONE for t in trials)
    for lc in report.launches:
        for probe in lc.probes:
            (stored,) = [t for t in trials if t.id == probe.trial_id]
            assert stored.workload == probe_workload(BASE, grid, probe.value)
            assert stored.tags["kind"] == "capacity" and stored.tags["value"] == probe.value
            assert stored.results is not None
            assert stored.results["completed"] == 4 * probe.value
            assert probe.met == (stored.results["p99_ttft_ms"] <= 200)


def test_an_engine_that_does_not_start_measures_nothing(double_env: Path, tmp_path: Path) -> None:
    config = EngineConfig(model="engine-double", engine={"max-num-seqs": 4})
    with TrialStore(tmp_path / "trials.db") as store:
        runner = _runner(store)
        runner.command_for = lambda cfg: [sys.executable, "-c", "raise SystemExit(3)"]
        report = asyncio.run(
            run_capacity(
                config, BASE, SLO, Grid("concurrency", 1, 1, 8), runner, launches=1, probes=3
            )
        )
    assert report.interval is None
    assert "not measured" in report.summary() and "did not start" in report.summary()


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNELAB_HOME": str(home), "DOUBLE_TOKEN_MS": "25", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.study_cli", "capacity", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


# The double's small workload and grid, shared by the CLI tests.
SMALL = ["--input-len", "16", "--output-len", "16", "--num-prompts", "4", "--warmup", "0"]
SMALL += ["--max", "32"]


def test_cli_prints_the_answer_and_json(tmp_path: Path) -> None:
    common = [
        "--model",
        "engine-double",
        "--set",
        "max-num-seqs=4",
        *SMALL,
    ]
    # One launch: repeats over launches are the two tests above and below.
    done = _cli(
        *common,
        "--slo",
        "p99_ttft_ms<=200",
        "--launches",
        "1",
        "--probes",
        "7",
        "--json",
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["capacity"]["mean"] == 4 and data["by"] == "concurrency"
    assert data["slo"] == "p99_ttft_ms<=200" and len(data["launches"]) == 1
    bad = _cli(*common, "--slo", "ttft:500", home=tmp_path)
    assert bad.returncode == 2
    assert "goodput syntax" in bad.stderr and "p99_ttft_ms<=500" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_capacity_ab_between_two_max_num_seqs(tmp_path: Path) -> None:
    done = _cli(
        "--model",
        "engine-double",
        "--set",
        "max-num-seqs=3",
        "--b-set",
        "max-num-seqs=6",
        "--slo",
        "p99_ttft_ms<=200",
        *SMALL,
        "--launches",
        "2",
        "--probes",
        "7",
        "--json",
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [lc["capacity"] for lc in data["a"]["launches"]] == [3, 3]
    assert [lc["capacity"] for lc in data["b"]["launches"]] == [6, 6]
    row = data["comparison"]
    assert row["verdict"] == "B better" and row["rel_diff"] == pytest.approx(1.0)
    assert data["summary"].startswith("B carries +100.0% [+100.0%, +100.0%] concurrency vs A")


def test_capacity_sweep_ranks_values_and_compares_the_best_with_the_runner_up(
    tmp_path: Path,
) -> None:
    done = _cli(
        "--model",
        "engine-double",
        "--sweep",
        "max-num-seqs=6,2",
        "--slo",
        "p99_ttft_ms<=200",
        *SMALL,
        "--launches",
        "2",
        "--probes",
        "6",
        "--study",
        "capsw",
        "--store",
        str(tmp_path / "trials.db"),
        "--json",
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    by_value = {p["value"]: [lc["capacity"] for lc in p["launches"]] for p in data["points"]}
    # The double's capacity is max-num-seqs (test above); under load a launch may read lower.
    assert by_value[6] == [6, 6] and all(1 <= c <= 2 for c in by_value[2]), by_value
    assert data["best"] == {"value": 6, "label": "max-num-seqs=6"}
    # The best against the runner-up, as a capacity A/B would compare them.
    row = data["comparison"]
    assert row["verdict"] == "B better" and row["rel_ci_low"] > 1.0
    assert "max-num-seqs=6 carries significantly more" in data["summary"]
    # Launches round-robin, reversed every other round: 6 2, then 2 6 (one engine each).
    with TrialStore(tmp_path / "trials.db") as store:
        trials = store.list("capsw")
    firsts = {}
    for t in trials:
        key = (t.tags["launch"], t.arm)
        firsts[key] = min(firsts.get(key, t.created_at), t.created_at)
    order = [arm for (_, arm) in sorted(firsts, key=lambda k: firsts[k])]
    assert order == [f"max-num-seqs={v}" for v in (6, 2, 2, 6)]
    bad = _cli(
        "--model",
        "engine-double",
        "--sweep",
        "max-num-seqs=4",
        "--slo",
        "p99_ttft_ms<=200",
        home=tmp_path,
    )
    assert bad.returncode == 2 and "two or more values" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr


def _tune(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNELAB_HOME": str(home), "DOUBLE_TOKEN_MS": "25", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.study_cli", "tune", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_tune_with_capacity_as_the_objective(tmp_path: Path) -> None:
    import optuna

    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    common = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
    common += ["--num-prompts", "4", "--warmup", "0", "--storage", url, "--study", "tc"]
    common += ["--store", str(tmp_path / "trials.db")]
    done = _tune(
        "--objective",
        "capacity",
        "--slo",
        "p99_ttft_ms<=200",
        "--param",
        "max-num-seqs=2,5",
        "--trials",
        "2",
        "--seed",
        "1",
        "--json",
        *common,
        home=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["objective"] == "capacity" and len(data["points"]) == 2
    # Each point is one launch whose capacity is the double's max-num-seqs.
    for point in data["points"]:
        assert point["capacity"] == point["values"]["max-num-seqs"], point
    best = max(p["capacity"] for p in data["points"])
    assert data["best"]["capacity"] == best
    assert "--launches 3" in data["summary"]  # one launch per point: confirm with an interval
    # Optuna holds the same values, named, each linked to its stored probe trials.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="tc", storage=url)
    assert study.metric_names == ["capacity"]
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE]
    with TrialStore(tmp_path / "trials.db") as store:
        stored = {t.id: t for t in store.list("tc")}
    for frozen in study.trials:
        point = next(p for p in data["points"] if p["optuna_number"] == frozen.number)
        assert frozen.values == [point["capacity"]]
        ids = frozen.user_attrs["probe_trial_ids"]
        assert ids and all(stored[i].tags["kind"] == "capacity" for i in ids)
        assert {stored[i].config.engine["max-num-seqs"] for i in ids} == {
            frozen.params["max-num-seqs"]
        }
    # Resuming with another SLO, or searching the load itself, is refused before any launch.
    other = _tune(
        "--objective",
        "capacity",
        "--slo",
        "p99_ttft_ms<=300",
        "--param",
        "max-num-seqs=2,5",
        "--trials",
        "1",
        *common,
        home=tmp_path,
    )
    assert other.returncode == 2 and "started with another" in other.stderr, other.stderr
    load = _tune(
        "--objective",
        "capacity",
        "--slo",
        "p99_ttft_ms<=200",
        "--param",
        "concurrency=2,4",
        "--trials",
        "1",
        *common[:-4],
        home=tmp_path,
    )
    assert load.returncode == 2 and "leave concurrency out" in load.stderr, load.stderr
    none = _tune(
        "--objective",
        "capacity",
        "--param",
        "max-num-seqs=2,5",
        "--trials",
        "1",
        *common,
        home=tmp_path,
    )
    assert none.returncode == 2 and "--slo" in none.stderr
    assert "Traceback" not in other.stderr + load.stderr + none.stderr
