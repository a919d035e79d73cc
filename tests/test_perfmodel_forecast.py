"""A trial's forecast before it runs (issue 31): made from its study's comparable trials,
stored on the trial, scored against what it then measured, and printed by ``tunelab model``.

The pure tests use trials made from the model's own arithmetic (tests/test_perfmodel.py's
``trial``), so the right forecast is known exactly. The runner test measures capacity probes
on the study engine double (its ``/metrics`` has vLLM's inter-token histogram), and asserts
the forecast each probe stored is the core's forecast from the probes measured before it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support.study_cli import double_command
from tests.test_perfmodel import COSTS, point
from tests.test_perfmodel import trial as made_trial
from tuner.bench.workload import Workload
from tuner.cli.app import app, register_all
from tuner.config import EngineConfig
from tuner.perfmodel.fit import MIN_HALF_WIDTH
from tuner.perfmodel.forecast import Forecast, forecast, forecast_record, record_of, score_of
from tuner.rules import Target
from tuner.studies.capacity import Grid
from tuner.studies.capacity_run import run_capacity
from tuner.studies.executor import TrialRunner
from tuner.studies.slo import parse_slo
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.shapes import ShapeError, check_trial
from tuner.trials.store import TrialStore

register_all(app)
MEASURED = ((4, 2), (4, 8), (16, 8), (16, 32), (64, 32))


def _study(name: str = "s") -> list[Trial]:
    return [made_trial(name, s, c) for s, c in MEASURED]


def _candidate(seqs: int, conc: int, **engine: object) -> Trial:
    t = made_trial("s", seqs, conc, **engine)
    t.status, t.results, t.server = TrialStatus.QUEUED, None, None
    return t


def test_a_trial_is_forecast_from_the_study_s_trials_of_its_context() -> None:
    found = forecast(_study(), _candidate(32, 16))
    want = COSTS.predict(point(32, 2048, 16))
    assert found.known and found.trials == 5
    assert found.output_throughput == pytest.approx(want.output_throughput, rel=1e-6)
    assert found.itl_ms == pytest.approx(want.itl_ms, rel=1e-6)
    assert found.throughput_band == MIN_HALF_WIDTH  # exact trials: the narrowest interval
    assert found.describe().startswith(f"model: ~{want.output_throughput:,.0f} tok/s (")
    # A trial of another context in the study is not used, and does not spoil the fit.
    other = made_trial("s", 8, 8, **{"attention-backend": "TRITON_ATTN"})
    assert forecast([*_study(), other], _candidate(32, 16)) == found


@pytest.mark.parametrize(
    ("candidate", "trials", "said"),
    [
        (lambda: _candidate(32, 16, **{"attention-backend": "ROCM_AITER_FA"}), _study,
         "attention-backend differ(s) from every measured trial"),
        (lambda: dataclasses.replace(_candidate(32, 16), workload=Workload(
            input_len=256, output_len=64, num_prompts=64, concurrency=16, request_rate=4.0)),
         _study, "this workload is a rate, a dataset, sessions or varied lengths"),
        (lambda: _candidate(32, 16), lambda: _study()[:2],
         "2 measured trial(s) like it; the model needs 3"),
        (lambda: _candidate(32, 16), lambda: [], "no measured trial of this study"),
    ],
    ids=["unmodelled-knob", "rate", "too-few", "none"],
)  # fmt: skip
def test_what_the_model_does_not_know_is_unknown_until_run(candidate, trials, said) -> None:
    found = forecast(trials(), candidate())
    assert not found.known and said in found.reason
    assert found.describe() == f"model: unknown until run — {found.reason}"


def test_a_stored_forecast_is_scored_against_what_was_then_measured() -> None:
    t = _candidate(32, 16)
    t.prediction = forecast(_study(), t).to_dict()
    want = COSTS.predict(point(32, 2048, 16))
    t.status = TrialStatus.DONE
    t.results = {"output_throughput": want.output_throughput / 1.25}  # 25 % slower than said
    t.server = {"mean_itl_ms": want.itl_ms}
    score = score_of(t)
    assert score is not None and score.throughput_error == pytest.approx(0.25)
    assert score.itl_error == pytest.approx(0.0) and not score.inside
    assert "off +25%" in score.describe() and "OUTSIDE its 80 % interval" in score.describe()
    assert record_of([t, *_study()]) == {
        "forecasts": 1,
        "median_abs_throughput_error": pytest.approx(0.25),
        "median_abs_itl_error": pytest.approx(0.0),
        "inside": 0.0,
    }
    t.prediction = Forecast(reason="no measured trial of this study to learn from yet").to_dict()
    assert score_of(t) is None and record_of([t]) == {"forecasts": 0}


def test_the_forecast_round_trips_through_the_store_and_a_bad_one_is_refused(
    tmp_path: Path,
) -> None:
    t = _candidate(32, 16)
    t.prediction = forecast_record(_study(), t)
    with TrialStore(tmp_path / "t.db") as store:
        store.add(t)
        assert store.get(t.id).prediction == t.prediction
    bad = {**t.to_dict(), "prediction": {"output_throughput": "fast", "trials": 5}}
    with pytest.raises(ShapeError, match=r"prediction\.output_throughput"):
        check_trial(bad)


def test_each_capacity_probe_stores_the_forecast_of_the_probes_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probes share one engine and context: from the fourth on, each is forecast."""
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "10")
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))
    config = EngineConfig(model="engine-double", engine={"max-num-seqs": 4})
    base = Workload(input_len=16, output_len=16, num_prompts=4, warmup_requests=0)
    context = RunContext(Target(note="study engine double"), None, [])
    store_path = tmp_path / "trials.db"
    with TrialStore(store_path) as store:
        runner = TrialRunner(store, None, {"startup_timeout": 60, "context": context},
                             double_command)  # fmt: skip
        asyncio.run(run_capacity(config, base, parse_slo("p99_ttft_ms<=120"),
                                 Grid("concurrency", 1, 1, 16), runner, launches=1, probes=6,
                                 study="fc"))  # fmt: skip
        probes = sorted(store.list("fc"), key=lambda t: t.created_at)
    assert [t.status for t in probes] == [TrialStatus.DONE] * 6
    assert all(t.server and t.server["mean_itl_ms"] for t in probes)  # the double's histogram
    for i, probe in enumerate(probes):
        # The one owner: what the runner stored is the core's forecast from the probes before.
        assert probe.prediction == forecast(probes[:i], probe).to_dict()
        assert Forecast.from_dict(probe.prediction or {}).known == (i >= 3)
    scored = [s for p in probes if (s := score_of(p)) is not None]
    assert len(scored) == 3
    # The double's token gap is the model's per-step cost: its forecasts land near.
    assert all(abs(s.throughput_error) < 0.5 for s in scored), [s.describe() for s in scored]
    print(*(s.describe() for s in scored), sep="\n")
    out = CliRunner().invoke(app, ["model", "--study", "fc", "--store", str(store_path), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["stored_forecasts"] == record_of(probes)
