"""Every rule, shown firing and shown silent, on real model configs and ROCm/CUDA/CPU targets.

Each case names the rule, a config, a model, a target and a workload; the
"fires" cases also check the severity and, where the rule offers one, the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tuner.config import EngineConfig
from tuner.model import ModelInfo, analyze
from tuner.rules import RULES, Severity, Target, WorkloadShape, check

CONFIGS = Path(__file__).parent / "data" / "hf-configs"


@cache
def model(name: str) -> ModelInfo:
    files = {
        "llama8b": "meta-llama__Llama-3.1-8B-Instruct",
        "llama70b": "meta-llama__Llama-3.1-70B-Instruct",
        "ds3": "deepseek-ai__DeepSeek-V3",
        "ds2lite": "deepseek-ai__DeepSeek-V2-Lite-Chat",
        "oss": "openai__gpt-oss-20b",
        "mixtral": "mistralai__Mixtral-8x7B-Instruct-v0.1",
        "qwen3moe": "Qwen__Qwen3-30B-A3B",
        "qwen3fp8": "Qwen__Qwen3-30B-A3B-FP8",
    }
    return analyze(str(CONFIGS / f"{files[name]}.json"))


def ultra_sparse() -> ModelInfo:
    """A Maverick-shaped MoE (128 experts, 1 per token: 0.78%) built from the Mixtral config."""
    import json

    from tuner.model import from_config

    cfg = json.loads((CONFIGS / "mistralai__Mixtral-8x7B-Instruct-v0.1.json").read_text())
    cfg.update(num_local_experts=128, num_experts_per_tok=1)
    return from_config(cfg, name="maverick-shaped", source="config-file", path=None)


ROCM_OLD = Target("0.10.2", "rocm", 8, 192.0)
ROCM_012 = Target("0.12.0", "rocm", 8, 192.0)
ROCM_NEW = Target("0.32.0", "rocm", 8, 192.0)
ROCM_018 = Target("0.18.0", "rocm", 8, 192.0)
ROCM_ANY = Target(None, "rocm", 8, 192.0)
ROCM_1 = Target("0.12.0", "rocm", 1, 192.0)
CUDA = Target("0.12.0", "cuda", 8, 80.0)
CPU = Target("0.32.0", "cpu", 1, None)


@dataclass
class Case:
    rule: str
    fires: bool
    env: dict[str, str] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    model: str | None = "llama8b"
    target: Target = ROCM_012
    workload: WorkloadShape | None = None
    severity: Severity | None = None
    fix: dict[str, Any] | None = None
    id: str = ""


AITER_ON = {"VLLM_ROCM_USE_AITER": "1"}

CASES = [
    # -- AITER ---------------------------------------------------------------
    Case(
        "aiter-subflag-without-master",
        True,
        env={"VLLM_ROCM_USE_AITER_MOE": "1"},
        severity=Severity.WARNING,
        fix={"VLLM_ROCM_USE_AITER": "1"},
        id="subflag-master-off",
    ),
    Case(
        "aiter-subflag-without-master",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "1"},
        id="master-on",
    ),
    Case(
        "aiter-subflag-without-master",
        False,
        env={"VLLM_ROCM_USE_AITER_MOE": "0"},
        id="subflag-off",
    ),
    Case(
        "aiter-online-tune-before-disabling-moe",
        True,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "0"},
        model="mixtral",
        severity=Severity.ADVICE,
        fix={"AITER_ONLINE_TUNE": "1", "VLLM_ROCM_USE_AITER_MOE": None},
    ),
    Case(
        "aiter-online-tune-before-disabling-moe",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "0", "AITER_ONLINE_TUNE": "1"},
        model="mixtral",
        id="tune-set",
    ),
    Case(
        "aiter-online-tune-before-disabling-moe",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "0"},
        model="llama8b",
        id="dense-model",
    ),
    Case(
        "aiter-fp8-kv-cache",
        True,
        env=AITER_ON,
        engine={"kv-cache-dtype": "fp8"},
        target=Target("0.9.1", "rocm", 1, 192.0),
        severity=Severity.ERROR,
        fix={"kv-cache-dtype": "auto"},
    ),
    Case(
        "aiter-fp8-kv-cache",
        True,
        env=AITER_ON,
        engine={"kv-cache-dtype": "fp8"},
        target=ROCM_ANY,
        severity=Severity.WARNING,
        id="unknown-version-warns",
    ),
    Case(
        "aiter-fp8-kv-cache",
        False,
        env=AITER_ON,
        engine={"kv-cache-dtype": "fp8"},
        target=ROCM_012,
        id="fixed-in-0.10",
    ),
    Case(
        "aiter-fp8-kv-cache",
        False,
        engine={"kv-cache-dtype": "fp8"},
        target=Target("0.9.1", "rocm"),
        id="aiter-off",
    ),
    Case(
        "shuffle-kv-layout",
        True,
        env=AITER_ON,
        workload=WorkloadShape(1024, 256, 64),
        target=ROCM_018,
        severity=Severity.ADVICE,
        fix={"VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env=AITER_ON,
        workload=WorkloadShape(1024, 256, 8),
        target=ROCM_018,
        id="low-concurrency",
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MHA": "0"},
        target=ROCM_018,
        workload=WorkloadShape(1024, 256, 64),
        id="not-aiter-fa",
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env=AITER_ON,
        workload=WorkloadShape(1024, 256, 64),
        target=ROCM_012,
        id="flag-not-yet-in-0.12",
    ),
    Case(
        "shuffle-kv-layout",
        True,
        env={**AITER_ON, "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
        model="oss",
        severity=Severity.ERROR,
        fix={"VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": None},
        id="sliding-window-breaks",
    ),
    # -- attention -------------------------------------------------------------
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "ROCM_AITER_FA"},
        target=CUDA,
        severity=Severity.ERROR,
        id="rocm-backend-on-cuda",
    ),
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "ROCM_AITER_UNIFIED_ATTN"},
        target=ROCM_OLD,
        severity=Severity.ERROR,
        id="not-yet-in-0.10",
    ),
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "NO_SUCH_BACKEND"},
        severity=Severity.ERROR,
        id="unknown-name",
    ),
    Case(
        "attention-backend-unavailable",
        False,
        engine={"attention-backend": "ROCM_AITER_FA"},
        target=ROCM_012,
    ),
    Case(
        "attention-backend-vs-mla",
        True,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        model="llama8b",
        severity=Severity.ERROR,
        fix={"attention-backend": None},
        id="mla-backend-dense-model",
    ),
    Case(
        "attention-backend-vs-mla",
        True,
        engine={"attention-backend": "ROCM_AITER_FA"},
        model="ds3",
        severity=Severity.ERROR,
        fix={"attention-backend": "ROCM_AITER_MLA"},
        id="mha-backend-mla-model",
    ),
    Case(
        "attention-backend-vs-mla",
        False,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        model="ds3",
    ),
    Case(
        "aiter-mla-block-size",
        True,
        env=AITER_ON,
        model="ds3",
        target=ROCM_OLD,
        severity=Severity.ERROR,
        fix={"block-size": 1},
    ),
    Case(
        "aiter-mla-block-size",
        True,
        engine={"attention-backend": "ROCM_AITER_MLA", "block-size": 16},
        model="ds3",
        target=ROCM_ANY,
        severity=Severity.WARNING,
        id="unknown-version",
    ),
    Case(
        "aiter-mla-block-size",
        False,
        env=AITER_ON,
        engine={"block-size": 1},
        model="ds3",
        target=ROCM_OLD,
        id="block-1",
    ),
    Case(
        "aiter-mla-block-size",
        False,
        env=AITER_ON,
        model="ds3",
        target=ROCM_012,
        id="lifted-in-0.11.1",
    ),
    Case(
        "aiter-mla-block-size", False, env=AITER_ON, model="llama8b", target=ROCM_OLD, id="not-mla"
    ),
    Case(
        "aiter-unified-attention",
        True,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1"},
        target=ROCM_012,
        severity=Severity.WARNING,
        fix={"VLLM_ROCM_USE_AITER_MHA": "0"},
        id="mha-still-on",
    ),
    Case(
        "aiter-unified-attention",
        True,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_MHA": "0",
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
        },
        target=ROCM_NEW,
        severity=Severity.WARNING,
        fix={
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": None,
            "attention-backend": "ROCM_AITER_UNIFIED_ATTN",
            "VLLM_ROCM_USE_AITER": "1",
        },
        id="env-ignored-in-new-vllm",
    ),
    Case(
        "aiter-unified-attention",
        True,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_MHA": "0",
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
            "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1",
        },
        target=ROCM_012,
        severity=Severity.WARNING,
        fix={"VLLM_V1_USE_PREFILL_DECODE_ATTENTION": None},
        id="prefill-decode-on",
    ),
    Case(
        "aiter-unified-attention",
        False,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_MHA": "0",
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
        },
        target=ROCM_012,
        id="correct-trio",
    ),
    Case(
        "gpt-oss-unified-attention",
        True,
        env=AITER_ON,
        model="oss",
        target=ROCM_012,
        severity=Severity.ADVICE,
        fix={"VLLM_ROCM_USE_AITER": "1", "attention-backend": "ROCM_AITER_UNIFIED_ATTN"},
    ),
    Case(
        "gpt-oss-unified-attention",
        True,
        model="oss",
        target=ROCM_OLD,
        severity=Severity.ADVICE,
        id="old-vllm-says-upgrade",
    ),
    Case(
        "gpt-oss-unified-attention",
        False,
        env=AITER_ON,
        engine={"attention-backend": "ROCM_AITER_UNIFIED_ATTN"},
        model="oss",
        target=ROCM_012,
    ),
    Case("gpt-oss-unified-attention", False, env=AITER_ON, model="llama8b", id="not-gpt-oss"),
    # -- CUDA graphs -----------------------------------------------------------
    Case(
        "cudagraph-mode-vs-backend",
        True,
        engine={"cudagraph-mode": "FULL"},
        model="ds3",
        target=ROCM_012,
        severity=Severity.ERROR,
        fix={"cudagraph-mode": "PIECEWISE"},
        id="triton-mla-full",
    ),
    Case(
        "cudagraph-mode-vs-backend",
        True,
        engine={"cudagraph-mode": "FULL_AND_PIECEWISE"},
        model="ds3",
        target=ROCM_012,
        severity=Severity.WARNING,
        fix={"cudagraph-mode": "PIECEWISE"},
        id="triton-mla-downgraded",
    ),
    Case(
        "cudagraph-mode-vs-backend",
        True,
        env=AITER_ON,
        engine={"cudagraph-mode": "FULL"},
        target=ROCM_012,
        severity=Severity.WARNING,
        fix={"cudagraph-mode": "FULL_AND_PIECEWISE"},
        id="aiter-fa-uniform-only",
    ),
    Case(
        "cudagraph-mode-vs-backend",
        False,
        engine={"cudagraph-mode": "PIECEWISE"},
        model="ds3",
        target=ROCM_012,
    ),
    Case(
        "cudagraph-mode-vs-backend",
        False,
        engine={"cudagraph-mode": "FULL"},
        target=ROCM_012,
        id="triton-unified-full-ok",
    ),
    Case(
        "cudagraph-mode-with-enforce-eager",
        True,
        engine={"cudagraph-mode": "FULL", "enforce-eager": True},
        severity=Severity.WARNING,
    ),
    Case("cudagraph-mode-with-enforce-eager", False, engine={"cudagraph-mode": "FULL"}),
    # -- quantization -----------------------------------------------------------
    Case(
        "awq-on-rocm",
        True,
        engine={"quantization": "awq"},
        severity=Severity.WARNING,
        fix={"VLLM_USE_TRITON_AWQ": "1"},
    ),
    Case(
        "awq-on-rocm",
        True,
        env={"VLLM_USE_TRITON_AWQ": "1"},
        engine={"quantization": "awq", "dtype": "bfloat16"},
        severity=Severity.ERROR,
        fix={"dtype": "auto"},
        id="awq-bf16",
    ),
    Case(
        "awq-on-rocm",
        False,
        env={"VLLM_USE_TRITON_AWQ": "1"},
        engine={"quantization": "awq", "dtype": "auto"},
    ),
    Case("awq-on-rocm", False, engine={"quantization": "awq"}, target=CUDA, id="cuda"),
    Case(
        "prequantized-quantization-conflict",
        True,
        engine={"quantization": "awq"},
        model="qwen3fp8",
        severity=Severity.ERROR,
        fix={"quantization": None},
    ),
    Case(
        "prequantized-quantization-conflict",
        False,
        engine={"quantization": "fp8"},
        model="qwen3fp8",
    ),
    Case("prequantized-quantization-conflict", False, model="qwen3fp8", id="unset"),
    Case(
        "on-the-fly-quantization",
        True,
        engine={"quantization": "fp8"},
        model="llama70b",
        severity=Severity.ADVICE,
    ),
    Case(
        "on-the-fly-quantization",
        False,
        engine={"quantization": "fp8"},
        model="qwen3fp8",
        id="prequantized",
    ),
    # -- batching ---------------------------------------------------------------
    Case(
        "chunked-prefill-off-mbt",
        True,
        engine={
            "enable-chunked-prefill": False,
            "max-num-batched-tokens": 8192,
            "max-model-len": 32768,
        },
        severity=Severity.ERROR,
        fix={"max-num-batched-tokens": 32768},
    ),
    Case(
        "chunked-prefill-off-mbt",
        False,
        engine={
            "enable-chunked-prefill": False,
            "max-num-batched-tokens": 32768,
            "max-model-len": 32768,
        },
    ),
    Case(
        "chunked-prefill-off-mbt",
        False,
        engine={"max-num-batched-tokens": 8192, "max-model-len": 32768},
        id="chunked-on",
    ),
    Case(
        "max-model-len-vs-workload",
        True,
        engine={"max-model-len": 2048},
        workload=WorkloadShape(2048, 512, 8),
        severity=Severity.ERROR,
        fix={"max-model-len": 2560},
    ),
    Case(
        "max-model-len-vs-workload",
        False,
        engine={"max-model-len": 4096},
        workload=WorkloadShape(2048, 512, 8),
    ),
    Case(
        "max-model-len-over-model",
        True,
        engine={"max-model-len": 200000},
        severity=Severity.ERROR,
        fix={"max-model-len": 131072},
    ),
    Case("max-model-len-over-model", False, engine={"max-model-len": 8192}),
    Case(
        "mbt-by-goal",
        True,
        engine={"max-num-batched-tokens": 65536},
        workload=WorkloadShape(512, 128, 8, "interactive"),
        severity=Severity.ADVICE,
        fix={"max-num-batched-tokens": 8192},
    ),
    Case(
        "mbt-by-goal",
        True,
        engine={"max-num-batched-tokens": 8192},
        workload=WorkloadShape(512, 128, 256, "offline"),
        severity=Severity.ADVICE,
        fix={"max-num-batched-tokens": 32768},
        id="offline-too-small",
    ),
    Case(
        "mbt-by-goal",
        False,
        engine={"max-num-batched-tokens": 24576},
        workload=WorkloadShape(512, 128, 64, "streaming"),
    ),
    Case(
        "mbt-by-goal",
        False,
        engine={"max-num-batched-tokens": 65536},
        workload=WorkloadShape(512, 128, 8),
        id="no-goal",
    ),
    # -- memory -----------------------------------------------------------------
    Case(
        "memory-fit",
        True,
        model="llama70b",
        target=Target("0.12.0", "rocm", 1, 80.0),
        severity=Severity.ERROR,
        id="weights-do-not-fit",
    ),
    Case(
        "memory-fit",
        True,
        model="llama70b",
        engine={"max-model-len": 8192},
        target=Target("0.12.0", "rocm", 8, 80.0),
        severity=Severity.ERROR,
        fix={"tensor-parallel-size": 2},
        id="tp1-fix-is-tp2",
    ),
    Case(
        "memory-fit",
        True,
        model="llama70b",
        engine={"tensor-parallel-size": 2},
        target=Target("0.12.0", "rocm", 8, 80.0),
        severity=Severity.ERROR,
        fix={"max-model-len": 27648},
        id="tp2-kv-below-131k-context",
    ),
    Case(
        "memory-fit",
        True,
        model="llama8b",
        engine={"max-model-len": 131072, "gpu-memory-utilization": 0.3},
        target=Target("0.12.0", "rocm", 1, 32.0),
        severity=Severity.ERROR,
        id="one-sequence-does-not-fit",
    ),
    Case(
        "memory-fit",
        True,
        model="llama8b",
        engine={"max-model-len": 32768},
        target=Target("0.12.0", "rocm", 1, 192.0),
        workload=WorkloadShape(30000, 2000, 512),
        severity=Severity.WARNING,
        id="workload-exceeds-kv",
    ),
    Case(
        "memory-fit",
        False,
        model="llama8b",
        engine={"max-model-len": 8192, "max-num-seqs": 64},
        target=Target("0.12.0", "rocm", 1, 192.0),
    ),
    Case(
        "memory-fit",
        False,
        model="llama70b",
        target=Target("0.12.0", "rocm", 1, None),
        id="vram-unknown",
    ),
    Case(
        "memory-fit",
        False,
        model="llama70b",
        engine={"quantization": "fp8", "max-model-len": 8192, "max-num-seqs": 1},
        target=Target("0.12.0", "rocm", 1, 80.0),
        id="online-fp8-halves-weights",
    ),
    Case(
        "gpu-memory-utilization-high",
        True,
        engine={"gpu-memory-utilization": 0.98},
        severity=Severity.WARNING,
        fix={"gpu-memory-utilization": 0.95},
    ),
    Case("gpu-memory-utilization-high", False, engine={"gpu-memory-utilization": 0.95}),
    # -- parallelism ------------------------------------------------------------
    Case(
        "parallel-size-vs-gpus",
        True,
        engine={"tensor-parallel-size": 8},
        target=ROCM_1,
        severity=Severity.ERROR,
        fix={"tensor-parallel-size": 1},
    ),
    Case("parallel-size-vs-gpus", False, engine={"tensor-parallel-size": 8}, target=ROCM_012),
    Case(
        "tensor-parallel-divides-heads",
        True,
        engine={"tensor-parallel-size": 3},
        model="llama8b",
        severity=Severity.ERROR,
        fix={"tensor-parallel-size": 2},
    ),
    Case(
        "tensor-parallel-divides-heads", False, engine={"tensor-parallel-size": 4}, model="llama8b"
    ),
    Case(
        "moe-expert-parallel",
        True,
        engine={"tensor-parallel-size": 8},
        model="qwen3moe",
        severity=Severity.ADVICE,
        fix={"enable-expert-parallel": True},
        id="standard-density-wants-ep",
    ),
    Case(
        "moe-expert-parallel",
        True,
        engine={"tensor-parallel-size": 8, "enable-expert-parallel": True},
        model="ultra",
        severity=Severity.WARNING,
        fix={"enable-expert-parallel": False},
        id="ultra-sparse-no-ep",
    ),
    Case(
        "moe-expert-parallel",
        False,
        engine={"tensor-parallel-size": 8, "enable-expert-parallel": True},
        model="qwen3moe",
        id="ep-already-on",
    ),
    Case(
        "moe-expert-parallel",
        False,
        engine={"tensor-parallel-size": 8},
        model="llama70b",
        id="dense",
    ),
    Case(
        "moe-expert-parallel",
        False,
        engine={"tensor-parallel-size": 8},
        model="ultra",
        id="ultra-sparse-tp-only",
    ),
    # -- environment / availability --------------------------------------------
    Case(
        "knob-not-in-version",
        True,
        env={"VLLM_USE_TRITON_FLASH_ATTN": "0"},
        target=ROCM_NEW,
        severity=Severity.ERROR,
        fix={"VLLM_USE_TRITON_FLASH_ATTN": None},
        id="removed-env",
    ),
    Case(
        "knob-not-in-version",
        True,
        engine={"num-scheduler-steps": 10},
        target=ROCM_012,
        severity=Severity.ERROR,
        fix={"num-scheduler-steps": None},
        id="removed-arg",
    ),
    Case("knob-not-in-version", False, env={"VLLM_USE_TRITON_FLASH_ATTN": "0"}, target=ROCM_OLD),
    Case(
        "knob-no-effect-on-platform",
        True,
        env=AITER_ON,
        target=CPU,
        severity=Severity.ADVICE,
        id="rocm-on-cpu",
    ),
    Case(
        "knob-no-effect-on-platform",
        True,
        env=AITER_ON,
        target=CUDA,
        severity=Severity.WARNING,
        fix={"VLLM_ROCM_USE_AITER": None},
        id="rocm-on-cuda",
    ),
    Case("knob-no-effect-on-platform", False, env=AITER_ON, target=ROCM_012),
    Case(
        "value-not-in-version",
        True,
        engine={"quantization": "ptpc_fp8"},
        target=ROCM_NEW,
        severity=Severity.ERROR,
        fix={"quantization": None},
        id="ptpc-removed",
    ),
    Case(
        "value-not-in-version",
        True,
        engine={"cudagraph-mode": "FULL"},
        target=Target("0.10.0", "rocm"),
        severity=Severity.ERROR,
        id="cudagraph-mode-too-old",
    ),
    Case("value-not-in-version", False, engine={"quantization": "ptpc_fp8"}, target=ROCM_012),
    Case(
        "unread-env-var",
        True,
        env={"VLLM_NOT_A_REAL_VAR": "1"},
        target=Target(
            "0.32.0", "rocm", env_vars=frozenset({"VLLM_ROCM_USE_AITER"}), introspected=True
        ),
        severity=Severity.WARNING,
        fix={"VLLM_NOT_A_REAL_VAR": None},
    ),
    Case(
        "unread-env-var",
        False,
        env={"VLLM_NOT_A_REAL_VAR": "1"},
        target=ROCM_012,
        id="not-introspected",
    ),
    Case(
        "hip-visible-devices",
        True,
        env={"HIP_VISIBLE_DEVICES": "0,1"},
        severity=Severity.WARNING,
        fix={"HIP_VISIBLE_DEVICES": None, "CUDA_VISIBLE_DEVICES": "0,1"},
    ),
    Case("hip-visible-devices", False, env={"CUDA_VISIBLE_DEVICES": "0,1"}),
    Case(
        "nccl-channels-single-gpu",
        True,
        env={"NCCL_MIN_NCHANNELS": "112"},
        severity=Severity.ADVICE,
        fix={"NCCL_MIN_NCHANNELS": None},
    ),
    Case(
        "nccl-channels-single-gpu",
        False,
        env={"NCCL_MIN_NCHANNELS": "112"},
        engine={"tensor-parallel-size": 8},
    ),
]


def case_id(case: Case) -> str:
    return f"{case.rule}-{'fires' if case.fires else 'silent'}" + (f"-{case.id}" if case.id else "")


def run(case: Case) -> list[Any]:
    info = None
    if case.model == "ultra":
        info = ultra_sparse()
    elif case.model:
        info = model(case.model)
    config = EngineConfig(model="m", env=dict(case.env), engine=dict(case.engine))
    return check(config, info, case.target, case.workload)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case: Case) -> None:
    found = run(case)
    assert not [f for f in found if f.rule == "internal-error"], found
    mine = [f for f in found if f.rule == case.rule]
    if not case.fires:
        assert mine == [], mine
        return
    assert mine, f"{case.rule} did not fire; got {[f.rule for f in found]}"
    hit = mine[0]
    assert hit.message and hit.source and hit.knobs
    if case.severity is not None:
        assert hit.severity is case.severity, hit
    if case.fix is not None:
        assert hit.fix == case.fix, hit
    if case.id == "old-vllm-says-upgrade":
        assert hit.fix is None and "upgrade" in hit.message


def test_every_rule_has_a_firing_and_a_silent_case() -> None:
    firing = {c.rule for c in CASES if c.fires}
    silent = {c.rule for c in CASES if not c.fires}
    ids = {r.id for r in RULES}
    assert ids - firing == set(), "rules without a firing test"
    assert ids - silent == set(), "rules without a silent test"


def test_rules_cite_a_reference_section() -> None:
    for case in CASES:
        if case.fires:
            for finding in run(case):
                if finding.rule == case.rule and "tunelab" not in finding.source:
                    assert "§" in finding.source or "vllm" in finding.source.lower(), finding
