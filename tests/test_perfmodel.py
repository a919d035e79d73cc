"""The study performance model (issue 31): the wave arithmetic, the fit, the honesty checks,
and ``tunelab model`` printing what the core returns.

Trials here are made from the model's own arithmetic with known step costs (plus, where
said, a known error), so each test knows the right answer: the fit must recover the costs,
the held-out score must see the error it was given, and a trial that differs in a knob the
model does not know must not be predicted. The CPU-engine accuracy is a benchmark
(``benchmarks/perf_model.py``), not a test: it is a measurement on a noisy machine.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli.app import app, register_all
from tuner.config import EngineConfig
from tuner.perfmodel import Observation, Point, accuracy, calibrate
from tuner.perfmodel.fit import MIN_HALF_WIDTH, ModelError, StepModel
from tuner.perfmodel.observation import observation_of_trial, point_of
from tuner.perfmodel.study import study_model
from tuner.perfmodel.waves import duration_row, itl_row, waves
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

register_all(app)
COSTS = StepModel(a=2e-3, b=50e-6, c=3e-6, context="c", trials=0)
GRID = [(s, m, c) for s in (4, 16, 64) for m in (256, 2048) for c in (2, 8, 32)]


def point(seqs: int, mbt: int, conc: int | None, n: int | None = None) -> Point:
    return Point(seqs, mbt, conc, 256, 64, n or 4 * (conc or 8))


def measured(p: Point, model: StepModel = COSTS, error: float = 0.0, ctx: str = "c") -> Observation:
    pred = model.predict(p)
    return Observation(p, ctx, pred.output_throughput * (1 + error), pred.itl_ms * (1 - error))


def test_a_run_is_waves_of_the_smallest_batch_limit() -> None:
    p = Point(max_num_seqs=4, max_num_batched_tokens=256, concurrency=8, input_len=100,
              output_len=10, num_prompts=10)  # fmt: skip
    assert p.batch == 4 and waves(p) == [4, 4, 2]
    # Prefill steps: 400 tokens in 256-token steps = 2, twice; 200 tokens = 1; 9 decode steps.
    assert duration_row(p) == (2 + 9 + 2 + 9 + 1 + 9, (4 + 4 + 2) * 9, 1000)
    assert itl_row(p) == (1.0, (16 + 16 + 4) / 10, 0.0)
    assert Point(64, 2048, None, 1, 2, 5).batch == 5  # all at once, fewer than max-num-seqs


def test_the_fit_recovers_known_step_costs_and_predicts_unseen_points() -> None:
    calib = [measured(point(s, m, c)) for s, m, c in GRID[::4]]
    model = calibrate(calib)
    assert (model.a, model.b, model.c) == pytest.approx((COSTS.a, COSTS.b, COSTS.c), rel=1e-6)
    held = [measured(point(s, m, c)) for s, m, c in GRID if (s, m, c) not in GRID[::4]]
    score = accuracy(model, held)
    assert score.median_abs_throughput_error < 1e-6 and score.median_abs_itl_error < 1e-6
    assert model.throughput_band == MIN_HALF_WIDTH and score.coverage == 1.0


def test_the_interval_widens_with_the_error_the_trials_show() -> None:
    noisy = [measured(point(s, m, c), error=e)
             for (s, m, c), e in zip(GRID[:8], (0.2, -0.2, 0.1, -0.1, 0.2, -0.2, 0.1, -0.1),
                                     strict=True)]  # fmt: skip
    model = calibrate(noisy)
    assert model.throughput_band > 0.1 and model.itl_band > 0.1
    few = calibrate(noisy[:3])  # three trials, three unknowns: no held-out error to read
    assert few.throughput_band == 0.5


def test_trials_of_another_context_are_not_one_model() -> None:
    with pytest.raises(ModelError, match="differ in more than the modelled knobs"):
        calibrate([measured(point(4, 256, 2)), measured(point(8, 256, 2), ctx="other")])


@pytest.mark.parametrize(
    "changes",
    [{"request_rate": 5.0}, {"dataset_kind": "prefix", "prefix_len": 8, "prefix_groups": 2},
     {"range_ratio": 0.5}],
    ids=["rate", "prefix", "varied-lengths"],
)  # fmt: skip
def test_a_workload_the_waves_do_not_describe_is_not_observed(changes: dict) -> None:
    wl = Workload(input_len=16, output_len=8, num_prompts=8, concurrency=2, **changes)
    assert point_of({}, wl, (2048, 128)) is None
    assert point_of({}, Workload(input_len=16, output_len=8, num_prompts=8), (2048, 128))


def trial(study: str, seqs: int, conc: int, model: StepModel = COSTS, **engine: object) -> Trial:
    p = point(seqs, 2048, conc)
    pred = model.predict(p)
    wl = Workload(input_len=p.input_len, output_len=p.output_len, num_prompts=p.num_prompts,
                  concurrency=conc)  # fmt: skip
    return Trial(config=EngineConfig("m", engine={"max-num-seqs": seqs, **engine}),
                 workload=wl, study=study, status=TrialStatus.DONE,
                 results={"output_throughput": pred.output_throughput},
                 server={"mean_itl_ms": pred.itl_ms}, platform="cpu",
                 vllm_version="0.32.0")  # fmt: skip


def test_a_study_model_uses_its_largest_comparable_group_and_names_what_it_left() -> None:
    trials = [trial("s", s, c) for s, c in ((4, 2), (4, 8), (16, 8), (16, 32), (64, 32))]
    trials.append(trial("s", 8, 8, **{"attention-backend": "TRITON_ATTN"}))  # another config
    trials.append(Trial(config=EngineConfig("m"), workload=Workload(), study="s"))  # not done
    found = study_model(trials)
    assert found.model is not None and found.model.trials == 5
    assert (found.other_context, found.unusable) == (1, 1)
    assert found.held_out is not None and found.held_out.median_abs_throughput_error < 1e-6
    pred = found.predict({"max_num_seqs": 32, "concurrency": 16})
    want = COSTS.predict(Point(32, 2048, 16, 256, 64, 128))  # the latest trial, changed
    assert pred.output_throughput == pytest.approx(want.output_throughput, rel=1e-6)
    with pytest.raises(ValueError, match="unknown until run"):
        found.predict({"attention_backend": "ROCM_AITER_FA"})
    assert observation_of_trial(trials[-1]) is None
    assert study_model(trials[:2]).model is None  # two trials, three unknowns


def test_the_cli_prints_the_core_s_model_and_prediction(tmp_path) -> None:
    store_path = str(tmp_path / "trials.db")
    with TrialStore(store_path) as store:
        for s, c in ((4, 2), (4, 8), (16, 8), (16, 32), (64, 32)):
            store.add(trial("s", s, c))
        core = study_model(store.list(study="s"))
    cli = CliRunner()
    out = cli.invoke(app, ["model", "--study", "s", "--store", store_path, "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.stdout)
    assert core.model is not None and core.held_out is not None
    assert shown["costs"]["a_s"] == pytest.approx(core.model.a)
    assert shown["held_out"]["coverage"] == core.held_out.coverage
    assert len(shown["held_out"]["rows"]) == 5
    pred = cli.invoke(app, ["model", "--study", "s", "--store", store_path, "--max-num-seqs",
                            "32", "--concurrency", "16", "--json"])  # fmt: skip
    assert pred.exit_code == 0, pred.output
    want = core.predict({"max_num_seqs": 32, "concurrency": 16})
    assert json.loads(pred.stdout)["output_throughput"] == pytest.approx(want.output_throughput)
    table = cli.invoke(app, ["model", "--study", "s", "--store", store_path])
    assert "each trial predicted from the others" in table.stdout
    empty = cli.invoke(app, ["model", "--study", "none", "--store", store_path])
    assert empty.exit_code == 2 and "no model" in empty.stderr


def test_a_trial_s_point_is_what_vllm_ran_else_the_release_default_for_its_gpu() -> None:
    t = trial("s", 8, 4)
    t.config = EngineConfig("m", engine={})  # neither knob set
    t.platform, t.gpu_names = "rocm", ["AMD Instinct MI300X"]
    t.effective = {"values": {"max-num-batched-tokens": {"value": "8192", "evidence": "log"}}}
    obs = observation_of_trial(t)
    assert obs is not None
    # MBT from the engine's log; max-num-seqs from vLLM 0.32's >= 160 GiB tier (MI300X).
    assert (obs.point.max_num_batched_tokens, obs.point.max_num_seqs) == (8192, 1024)
    t.gpu_names = ["NVIDIA A100-SXM4-80GB"]  # vLLM keeps A100s on the smallest tier
    assert observation_of_trial(t).point.max_num_seqs == 256  # type: ignore[union-attr]
