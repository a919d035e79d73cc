"""The rules engine itself: never raises, sorts errors first, builds targets from introspection."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tuner.config import EngineConfig
from tuner.model import analyze
from tuner.rules import RULES, Finding, Severity, Target, WorkloadShape, check, has_errors
from tuner.rules.base import Rule

CONFIGS = Path(__file__).parent / "data" / "hf-configs"


def test_a_crashing_rule_becomes_an_internal_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: object) -> list[Finding]:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("tuner.rules.RULES", [Rule("broken", broken), *RULES])
    found = check(EngineConfig(model="m"), None, Target("0.12.0", "rocm"))
    internal = [f for f in found if f.rule == "internal-error"]
    assert len(internal) == 1
    assert internal[0].severity is Severity.WARNING and "broken" in internal[0].message
    assert "ZeroDivisionError" in internal[0].message


def test_findings_are_sorted_errors_first() -> None:
    cfg = EngineConfig(
        model="m",
        env={"NCCL_MIN_NCHANNELS": "112", "HIP_VISIBLE_DEVICES": "0"},
        engine={"tensor-parallel-size": 8},
    )
    found = check(cfg, None, Target("0.12.0", "rocm", gpus=1))
    ranks = [f.severity.rank for f in found]
    assert ranks == sorted(ranks) and has_errors(found)
    assert {f.severity for f in found} >= {Severity.ERROR, Severity.WARNING}


def test_no_rule_crashes_on_any_shipped_model_and_target() -> None:
    models = [None, *(analyze(str(p)) for p in sorted(CONFIGS.glob("*.json")))]
    targets = [
        Target(None, None),
        Target("0.9.1", "rocm", 1, 192.0),
        Target("0.10.2", "rocm", 8, 192.0),
        Target("0.32.0", "rocm", 8, 288.0),
        Target("0.12.0", "cuda", 4, 80.0),
        Target("0.32.0", "cpu", 1, None),
    ]
    configs = [
        EngineConfig(model="m"),
        EngineConfig(
            model="m",
            env={
                "VLLM_ROCM_USE_AITER": "1",
                "VLLM_ROCM_USE_AITER_MHA": "0",
                "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
                "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1",
            },
            engine={
                "tensor-parallel-size": 8,
                "cudagraph-mode": "FULL",
                "kv-cache-dtype": "fp8",
                "quantization": "awq",
                "enable-chunked-prefill": False,
                "max-num-batched-tokens": 1024,
                "max-model-len": 4096,
                "enable-expert-parallel": True,
                "gpu-memory-utilization": 0.99,
            },
        ),
    ]
    workloads = [
        None,
        WorkloadShape(4096, 1024, 1024, "offline"),
        WorkloadShape(None, None, None, "nonsense"),
    ]
    for model, target, cfg, work in itertools.product(models, targets, configs, workloads):
        found = check(cfg, model, target, work)
        assert not [f for f in found if f.rule == "internal-error"], (
            model and model.name,
            target,
            found,
        )
        for finding in found:
            assert finding.message and finding.rule


def test_target_from_introspection_reads_vllm_info() -> None:
    from tuner.introspect import VllmInfo

    info = VllmInfo(
        python="/usr/bin/python3",
        version="0.32.0",
        platform="rocm",
        gpu_arch="gfx942",
        env_vars=("VLLM_ROCM_USE_AITER",),
        attention_backends=("ROCM_AITER_FA", "TRITON_ATTN"),
        engine_args=("max-num-seqs",),
    )
    target = Target.from_introspection(info, gpus=8, vram_gib=192.0)
    assert (target.vllm_version, target.platform, target.gpu_arch, target.gpus) == (
        "0.32.0",
        "rocm",
        "gfx942",
        8,
    )
    assert target.introspected and target.attention_backends == ("ROCM_AITER_FA", "TRITON_ATTN")
    # the introspected list wins over the catalogue's
    found = check(EngineConfig(model="m", engine={"attention-backend": "ROCM_ATTN"}), None, target)
    assert any(f.rule == "attention-backend-unavailable" for f in found)
    # an env var the catalogue knows but this vLLM does not read
    found = check(EngineConfig(model="m", env={"VLLM_ROCM_USE_AITER_MHA": "1"}), None, target)
    assert any(f.rule in {"knob-not-in-version", "unread-env-var"} for f in found)


def test_workload_shape_from_bench_workload() -> None:
    workload_mod = pytest.importorskip("tuner.bench.workload")
    shape = WorkloadShape.from_workload(
        workload_mod.Workload(input_len=1000, output_len=200, concurrency=16), goal="interactive"
    )
    assert shape == WorkloadShape(1000, 200, 16, "interactive")
    assert shape.sequence_len == 1200


def test_finding_to_dict_is_json_shaped() -> None:
    f = Finding(Severity.ADVICE, ("a",), "msg", "src", {"a": None}, "r")
    assert f.to_dict() == {"severity": "advice", "rule": "r", "knobs": ["a"], "message": "msg",
                           "fix": {"a": None}, "source": "src"}  # fmt: skip
