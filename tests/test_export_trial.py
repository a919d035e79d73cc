"""``tunelab export TRIAL``: a stored trial becomes a preset with workload, results and noise.

Trials are written to the real trial store (SQLite under the test's
TUNELAB_HOME) as a finished A/B arm with three repeats would leave them; the
export is read back through the same loader as ``--preset``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli import export as export_cli
from tuner.config import EngineConfig
from tuner.export.errors import ExportError
from tuner.export.preset import load_preset
from tuner.export.trial import preset_from_trial
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

CONFIG = EngineConfig(
    model="org/model 'quoted' $(x)",
    env={"VLLM_ROCM_USE_AITER": "1", "HF_TOKEN": "hf_secret"},
    engine={"max-num-batched-tokens": 16384, "cudagraph-mode": "FULL_AND_PIECEWISE"},
)
WORKLOAD = Workload(input_len=256, output_len=64, num_prompts=32, concurrency=8)


def store_trials(values: list[float], status: TrialStatus = TrialStatus.DONE) -> list[Trial]:
    trials = []
    with TrialStore() as store:
        for i, value in enumerate(values):
            trial = Trial(
                config=CONFIG,
                workload=WORKLOAD,
                study="ab-1",
                arm="A",
                repeat=i,
                vllm_version="0.12.0",
                platform="rocm",
                gpu_names=["AMD Instinct MI300X"],
                startup_seconds=61.5,
                backend_actual="ROCM_AITER_FA",
            )
            store.add(trial)
            if status is TrialStatus.DONE:
                trial = store.save_result(
                    trial,
                    {
                        "output_throughput": value,
                        "p99_ttft_ms": 120.0 + i,
                        "completed": 32,
                        "failed": 0,
                        "ttfts": [0.1] * 200,
                    },
                    telemetry={
                        "energy_j": 1000.0,
                        "tokens_per_joule": 2.5,
                        "peak_vram_bytes": None,
                    },
                )
            else:
                trial = store.update_status(trial, status)
            trials.append(trial)
    return trials


def test_preset_from_a_finished_trial(tmp_path: Path) -> None:
    trials = store_trials([1000.0, 1010.0, 990.0])
    preset = preset_from_trial(trials[1].id[:8])
    assert preset.provenance.trial_id == trials[1].id
    assert preset.results["output_throughput"] == 1010.0
    assert preset.results["objective"] == "output_throughput"
    assert preset.results["attention_backend"] == "ROCM_AITER_FA"
    assert "ttfts" not in preset.results  # long per-request arrays are left out
    noise = preset.results["noise"]
    assert (
        noise["repeats"] == noise["count"] == 3
        and noise["mean"] == pytest.approx(1000.0)
        and noise["std"] == pytest.approx(10.0)
    )
    # AIPerf's names: se = std/sqrt(n), cv = std/mean, and the t interval (t_0.975,2 = 4.303).
    assert noise["se"] == pytest.approx(10.0 / 3**0.5)
    assert noise["cv"] == pytest.approx(0.01)
    assert noise["confidence_level"] == 0.95
    assert noise["ci_low"] == pytest.approx(1000.0 - 4.3027 * 10.0 / 3**0.5, abs=1e-2)
    assert noise["ci_high"] == pytest.approx(1000.0 + 4.3027 * 10.0 / 3**0.5, abs=1e-2)
    assert preset.workload["concurrency"] == 8 and preset.workload["request_rate"] == "inf"
    assert preset.target.gpu_name == "AMD Instinct MI300X" and preset.target.gpu_count == 1


def test_cli_export_of_a_trial_round_trips(tmp_path: Path) -> None:
    (trial,) = store_trials([1234.5])
    app = typer.Typer()
    export_cli.register(app)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["export", trial.id, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "left out HF_TOKEN" in result.output
    toml = tmp_path / f"trial-{trial.short_id}.toml"
    loaded = load_preset(toml)
    assert loaded.config.config_id == CONFIG.with_values({"HF_TOKEN": None}).config_id
    assert loaded.provenance.trial_id == trial.id
    assert loaded.results["output_throughput"] == 1234.5
    assert "noise" not in loaded.results  # one repeat: no spread to report
    for path in tmp_path.iterdir():
        assert "hf_secret" not in path.read_text()


def test_unfinished_and_unknown_trials_are_refused() -> None:
    (trial,) = store_trials([0.0], status=TrialStatus.FAILED)
    with pytest.raises(ExportError, match="is failed, not done"):
        preset_from_trial(trial.id)
    with pytest.raises(ExportError, match="no trial with id 'ffffffff'"):
        preset_from_trial("ffffffff")
