"""The study model before its first trials, on a GPU node: the GPU table's prior (issue 31).

No GPU here: the GPU names are what the telemetry backends report through the FAKE pynvml
and amdsmi modules (tests/fakes), the model's bytes come from a real published config
(../shared/data/hf-configs). The prior is held to the physics written out again here, the
scaling to trials measured at a known multiple of it, and the hand-over to the fitted
model once three trials of the context exist.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes import fake_amdsmi, fake_pynvml
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.model.info import from_config
from tuner.perfmodel.fit import StepModel
from tuner.perfmodel.forecast import forecast
from tuner.perfmodel.observation import trial_parts
from tuner.perfmodel.prior import (
    BANDWIDTH_EFFICIENCY,
    COMPUTE_EFFICIENCY,
    PRIOR_BAND,
    SCALED_BAND,
    gpu_prior,
)
from tuner.telemetry.amd import AmdSmiBackend
from tuner.telemetry.nvidia import NvmlBackend
from tuner.trials.model import Trial, TrialStatus

CONFIGS = Path(__file__).resolve().parents[2] / "shared" / "data" / "hf-configs"
LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"


def _info(name: str = LLAMA):  # type: ignore[no-untyped-def]
    raw = json.loads((CONFIGS / name).read_text())
    return from_config(raw, name=name.replace("__", "/")[:-5], source="config-file", path=None)


def _reported_name(backend: object) -> str:
    backend.open()  # type: ignore[attr-defined]
    try:
        return str(backend.snapshot(0).name)  # type: ignore[attr-defined]
    finally:
        backend.close()  # type: ignore[attr-defined]


H100 = _reported_name(NvmlBackend(fake_pynvml.make_module()))
MI300X = _reported_name(AmdSmiBackend(fake_amdsmi.make_module("mi300x")))


def _trial(gpu: str, seqs: int, conc: int, tput: float | None = None, itl: float | None = None,
           **engine: object) -> Trial:  # fmt: skip
    done = tput is not None
    return Trial(config=EngineConfig("meta-llama/Llama-3.1-8B-Instruct",
                                     engine={"max-num-seqs": seqs, **engine}),
                 workload=Workload(input_len=1024, output_len=128, num_prompts=4 * conc,
                                   concurrency=conc),
                 study="s", status=TrialStatus.DONE if done else TrialStatus.QUEUED,
                 results={"output_throughput": tput} if done else None,
                 server={"mean_itl_ms": itl} if done else None,
                 platform="rocm" if "AMD" in gpu else "cuda", vllm_version="0.32.0",
                 gpu_names=[gpu])  # fmt: skip


def _physics(trial: Trial, tb_s: float, tflops: float, tp: int = 1) -> StepModel:
    """The prior's step costs, written out again from the config's own figures."""
    info = _info()
    bandwidth, compute = tb_s * 1e12 * BANDWIDTH_EFFICIENCY, tflops * 1e12 * COMPUTE_EFFICIENCY
    kv = info.kv_bytes_per_token("auto") / tp  # GQA: 8 KV heads split over TP
    context = 1024 + 128 / 2
    return StepModel(info.weight_bytes / tp / bandwidth, kv * context / bandwidth,
                     2 * info.param_count / tp / compute, "physics", 0)  # fmt: skip


@pytest.mark.parametrize(("gpu", "tb_s", "tflops"), [(H100, 3.35, 989.0), (MI300X, 5.3, 1307.4)])
def test_the_first_run_is_forecast_from_the_gpu_table_and_the_model_s_bytes(
    gpu: str, tb_s: float, tflops: float
) -> None:
    candidate = _trial(gpu, 64, 32)
    prior = gpu_prior(_info(), candidate.gpu_names, candidate.config.engine)
    assert prior is not None and f"{tb_s:g} TB/s" in prior.source
    said = forecast([], candidate, prior)
    found = trial_parts(candidate)
    assert found is not None
    expected = _physics(candidate, tb_s, tflops).predict(found[0])
    assert said.output_throughput == pytest.approx(expected.output_throughput, rel=1e-9)
    assert said.itl_ms == pytest.approx(expected.itl_ms, rel=1e-9)
    assert said.throughput_band == PRIOR_BAND and said.trials == 0 and not said.reason
    assert "before any trial" in said.describe() and prior.source in said.describe()
    # An 8B model's decode step on one of these GPUs: a few milliseconds, not seconds.
    assert 2.0 < said.itl_ms < 20.0
    # Tensor parallelism splits the weights and the KV heads: the step is about TP times shorter.
    tp2 = _trial(gpu, 64, 32, **{"tensor-parallel-size": 2})
    halved = forecast([], tp2, gpu_prior(_info(), tp2.gpu_names, tp2.config.engine))
    assert halved.itl_ms == pytest.approx(said.itl_ms / 2, rel=0.02)


def test_measured_trials_scale_the_prior_until_the_model_can_be_fitted() -> None:
    candidate = _trial(H100, 64, 32)
    prior = gpu_prior(_info(), [H100], {})
    assert prior is not None
    alone = forecast([], candidate, prior)
    assert alone.output_throughput is not None and alone.itl_ms is not None

    def measured(seqs: int, conc: int) -> Trial:
        # This node runs at 60 % of the prior's speed, whatever the point.
        at = forecast([], _trial(H100, seqs, conc), prior)
        assert at.output_throughput is not None and at.itl_ms is not None
        return _trial(H100, seqs, conc, at.output_throughput * 0.6, at.itl_ms / 0.6)

    two = [measured(8, 8), measured(16, 16)]
    scaled = forecast(two, candidate, prior)
    assert scaled.output_throughput == pytest.approx(alone.output_throughput * 0.6)
    assert scaled.itl_ms == pytest.approx(alone.itl_ms / 0.6)
    assert scaled.throughput_band == SCALED_BAND and scaled.trials == 2
    assert "scaled to 2 trial(s)" in scaled.describe()
    # A third trial: the fitted model speaks, not the prior.
    fitted = forecast([*two, measured(32, 32)], candidate, prior)
    assert fitted.known and fitted.source == "" and fitted.trials == 3


def test_no_prior_without_the_gpu_s_published_figures_or_the_model() -> None:
    assert gpu_prior(_info(), [], {}) is None  # the CPU engine: no GPU
    assert gpu_prior(_info(), ["AMD Instinct MI308X"], {}) is None  # figures not published
    assert gpu_prior(None, [H100], {}) is None  # the model was not analysed
    candidate = _trial(H100, 64, 32)
    assert not forecast([], candidate, None).known


def test_the_tui_s_next_run_forecast_uses_the_prior_before_any_trial(tmp_path: Path) -> None:
    """The Findings panel's line is Study.forecast_next(...).short() (tests/test_tui_forecast.py);
    with the analysed model and this node's GPU it speaks before the study has a trial."""
    from tuner.lab.study import Study
    from tuner.rules.types import Target
    from tuner.trials.store import TrialStore

    node = Target(vllm_version="0.32.0", platform="cuda", gpu_name="H100")
    candidate = _trial(H100, 64, 32)
    with TrialStore(tmp_path / "t.db") as store:
        study = Study(store, "s")
        said = study.forecast_next(candidate.config, candidate.workload, model_info=_info(),
                                   node=node)  # fmt: skip
        alone = study.forecast_next(candidate.config, candidate.workload, node=node)
    direct = forecast([], candidate, gpu_prior(_info(), [H100], candidate.config.engine))
    assert said.output_throughput == pytest.approx(direct.output_throughput)
    assert said.short().endswith("· GPU table prior") and said.short().startswith("next run ≈")
    assert alone.short() == ""  # no model analysis: nothing to say before the first run
