"""The study model places capacity probes (issue 31): the replay, the bracket, the search.

The replay (tuner.perfmodel.simulate) is held to the wave arithmetic where both describe the
run, and to the queueing it adds. The search is run twice on the study engine double, whose
physics the model describes (a token gap per step; requests beyond max-num-seqs queue for a
whole generation): the same capacity with and without the model, and the model brackets the
boundary in fewer probes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from tests.support.study_cli import double_command
from tests.test_perfmodel import COSTS, point
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.perfmodel.simulate import replay
from tuner.perfmodel.waves import duration_row, itl_row
from tuner.rules import Target
from tuner.studies.capacity import Bracket, Grid
from tuner.studies.capacity_run import run_capacity
from tuner.studies.capacity_steps import probe_view
from tuner.studies.executor import TrialRunner
from tuner.studies.slo import parse_slo
from tuner.trials.context import RunContext
from tuner.trials.store import TrialStore

COSTS3 = [COSTS.a, COSTS.b, COSTS.c]


@pytest.mark.parametrize(("seqs", "mbt", "conc", "n"), [(4, 2048, 8, 35), (64, 2048, 8, 32),
                                                       (16, 4096, 32, 131), (3, 2048, 8, 35)])  # fmt: skip
def test_the_replay_is_the_wave_arithmetic_where_a_wave_prefills_in_one_step(
    seqs: int, mbt: int, conc: int, n: int
) -> None:
    p = point(seqs, mbt, conc, n)
    run = replay(p, COSTS.a, COSTS.b, COSTS.c)
    assert run.duration_s == pytest.approx(float(np.dot(duration_row(p), COSTS3)), rel=1e-9)
    assert run.metric("mean_itl_ms") == pytest.approx(
        float(np.dot(itl_row(p), COSTS3)) * 1e3, rel=1e-9
    )
    assert run.output_tokens == n * p.output_len and len(run.ttft_s) == n


def test_the_replay_queues_what_max_num_seqs_does_not_take() -> None:
    # 8 users on 4 sequences: every wave, 4 requests wait in the engine for the other 4's
    # whole generation, so half the TTFTs are a wave longer than the other half.
    p = point(4, 2048, 8, 32)
    run = replay(p, COSTS.a, COSTS.b, COSTS.c)
    ttft = sorted(run.ttft_s)
    wave = COSTS.a + COSTS.c * 4 * 256 + 63 * (COSTS.a + COSTS.b * 4)
    assert ttft[0] == pytest.approx(COSTS.a + COSTS.c * 4 * 256)
    assert ttft[-1] == pytest.approx(ttft[0] + wave)
    assert run.metric("p99_ttft_ms") == pytest.approx(ttft[-1] * 1e3, rel=0.01)
    assert replay(point(8, 2048, 8, 32), *COSTS3).metric("p99_ttft_ms") == pytest.approx(
        ttft[0] * 1e3 * (COSTS.a + COSTS.c * 8 * 256) / (COSTS.a + COSTS.c * 4 * 256)
    )
    assert run.metric("failed") is None  # a counter a replay cannot tell


def test_a_guess_is_measured_only_inside_the_open_bracket() -> None:
    b = Bracket(Grid("concurrency", 1, 1, 64), parse_slo("p99_ttft_ms<=100"))
    for units, met in ((1, True), (2, True), (4, True), (32, False)):
        b.record(units, {"p99_ttft_ms": 50.0 if met else 500.0})
    assert b.next_units() == 18  # bisection
    assert b.next_units(24) == 24 and b.usable_guess(24)
    for outside in (4, 32, 40, 2, None):
        assert not b.usable_guess(outside) and b.next_units(outside) == 18


def _capacity(tmp_path: Path, name: str, model: bool):  # type: ignore[no-untyped-def]
    config = EngineConfig(model="engine-double", engine={"max-num-seqs": 12})
    base = Workload(input_len=16, output_len=16, num_prompts=4, warmup_requests=0)
    context = RunContext(Target(note="study engine double"), None, [])
    with TrialStore(tmp_path / "trials.db") as store:
        runner = TrialRunner(store, None, {"startup_timeout": 60, "context": context},
                             double_command)  # fmt: skip
        report = asyncio.run(run_capacity(config, base, parse_slo("p99_ttft_ms<=100"),
                                          Grid("concurrency", 1, 1, 32), runner, launches=1,
                                          probes=8, study=name, model=model))  # fmt: skip
    return report.launches[0]


def test_the_model_brackets_the_capacity_in_fewer_probes_with_the_same_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "10")
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))
    plain = _capacity(tmp_path, "plain", model=False)
    guided = _capacity(tmp_path, "guided", model=True)
    print(plain.probes_text(), "|", plain.search_text())
    print(guided.probes_text(), "|", guided.search_text())
    assert plain.capacity == guided.capacity == 12 and guided.failing == 13
    assert plain.guided == 0 and "◆" not in plain.probes_text()
    # Doubling and bisection: 1, 2, 4, 8, 16✗, 12, 14✗, 13✗. The model, after 1, 2, 4:
    # 12◆ and 13◆✗.
    assert plain.to_converge == 8
    assert guided.to_converge == 5 and guided.guided == 2
    assert [p.value for p in guided.probes[:5]] == [1, 2, 4, 12, 13]
    assert "5 probe(s), 2 placed by the study model" in guided.search_text()
    # Every face reads a stored probe the same way (tuner.studies.capacity_steps).
    with TrialStore(tmp_path / "trials.db") as store:
        views = [probe_view(t) for t in store.list("guided")]
    marked = {v.trial.id for v in views if v is not None and "◆" in v.cell()}
    assert marked == {p.trial_id for p in guided.probes if p.by_model}


def test_a_guess_the_measurement_contradicts_ends_the_model_s_guessing() -> None:
    from tuner.studies.capacity_run import _Planner, probe_workload
    from tuner.trials import events as ev
    from tuner.trials.model import Trial, TrialStatus

    grid, base = Grid("concurrency", 1, 1, 64), Workload(input_len=256, output_len=64,
                                                         num_prompts=4)  # fmt: skip
    at8 = replay(point(8, 2048, 8, 32), *COSTS3).metric("p99_ttft_ms")
    assert at8 is not None
    slo = parse_slo(f"p99_ttft_ms<={at8 * 1.5}")  # 8 sequences: queueing beyond 8 users misses
    probes = [Trial(config=EngineConfig("m", engine={"max-num-seqs": 8}), workload=base,
                    study="s", platform="cpu", vllm_version="0.32.0") for _ in range(6)]  # fmt: skip
    planner = _Planner(probes, Bracket(grid, slo), base)

    def measure(i: int, p99: float | None = None) -> None:
        t = probes[i]
        users = int(t.tags["value"])
        assert t.workload == probe_workload(base, grid, users)
        run = replay(point(8, 2048, users, 4 * users), *COSTS3)
        t.status = TrialStatus.DONE
        t.results = {"output_throughput": run.output_throughput,
                     "p99_ttft_ms": p99 if p99 is not None else run.metric("p99_ttft_ms")}  # fmt: skip
        t.server = {"mean_itl_ms": run.metric("mean_itl_ms")}
        planner.on_event(ev.TrialStage(t.id, "measuring"))
        planner.on_event(ev.TrialDone(t))

    planner.plan(0)
    for i in range(3):
        measure(i)  # 1, 2, 4 users: doubling
    assert planner.error is None
    guided = probes[3]
    assert guided.tags["value"] == 8 and guided.tags["planned_by"] == "model"
    measure(3, p99=at8 * 10)  # the engine misses where the model said it meets
    assert planner.search.off and planner.error is None
    assert "planned_by" not in probes[4].tags and probes[4].tags["value"] == 6  # bisection
