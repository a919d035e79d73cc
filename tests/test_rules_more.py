"""Quantization, batching, memory, parallelism and environment rules, each firing and silent.

Shares the case format and helpers of ``tests/test_rules.py``; the check that
every registered rule has both a firing and a silent case lives here, over
both files' cases.
"""

from __future__ import annotations

import pytest

from tests.test_rules import (
    AITER_ON,
    CPU,
    CUDA,
    ROCM_012,
    ROCM_1,
    ROCM_NEW,
    ROCM_OLD,
    Case,
    case_id,
    check_case,
)
from tests.test_rules import CASES as FIRST_CASES
from tuner.rules import RULES, Severity, Target, WorkloadShape

CASES = [
    # -- quantization -----------------------------------------------------------
    # vLLM sets VLLM_USE_TRITON_AWQ=1 itself on ROCm (rocm.py ~1154): no warning any more.
    Case("awq-on-rocm", False, engine={"quantization": "awq"}, id="triton-awq-set-by-vllm"),
    # AWQ takes bfloat16 activations from 0.24 (auto_awq.py).
    Case(
        "awq-on-rocm",
        False,
        engine={"quantization": "awq", "dtype": "bfloat16"},
        target=ROCM_NEW,
        id="bf16-ok-in-0.32",
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
        engine={"max-num-batched-tokens": 2048},
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
    # vLLM's direction: lower MBT gives better ITL, so streaming at 24k is advised down
    # (000's guidance list says 16k-32k; its first bullets and vLLM's docs say lower).
    Case(
        "mbt-by-goal",
        True,
        engine={"max-num-batched-tokens": 24576},
        workload=WorkloadShape(512, 128, 64, "streaming"),
        severity=Severity.ADVICE,
        fix={"max-num-batched-tokens": 8192},
        id="streaming-lower-for-itl",
    ),
    Case(
        "mbt-by-goal",
        False,
        engine={"max-num-batched-tokens": 4096},
        workload=WorkloadShape(512, 128, 64, "streaming"),
    ),
    # Higher MBT improves TTFT (vLLM): the interactive goal is not told to lower it.
    Case(
        "mbt-by-goal",
        False,
        engine={"max-num-batched-tokens": 65536},
        workload=WorkloadShape(512, 128, 8, "interactive"),
        id="interactive-high-is-fine",
    ),
    # MI300X on 0.32: the default is 16384 (>= 160 GiB tier), not 8192: offline is advised.
    Case(
        "mbt-by-goal",
        True,
        target=Target("0.32.0", "rocm", 8, 192.0),
        workload=WorkloadShape(512, 128, 256, "offline"),
        fix={"max-num-batched-tokens": 32768},
        id="default-by-device",
    ),
    # A 48 GiB GPU on 0.32 defaults to 2048: the interactive goal is advised up.
    Case(
        "mbt-by-goal",
        True,
        target=Target("0.32.0", "cuda", 1, 48.0),
        workload=WorkloadShape(512, 128, 8, "interactive"),
        fix={"max-num-batched-tokens": 8192},
        id="small-gpu-default-2048",
    ),
    Case(
        "mbt-by-goal",
        False,
        target=Target("0.32.0", "rocm", 8, 192.0),
        workload=WorkloadShape(512, 128, 8, "interactive"),
        id="mi300x-default-16384-interactive",
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
        engine={"quantization": "fp8", "max-model-len": 4096, "max-num-seqs": 1},
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
        fix={"quantization": "fp8_per_channel"},  # its 0.32 successor
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
    # The policy's refusals (tuner/policy) as error findings, with a fix that removes them.
    Case(
        "policy",
        True,
        env={"TORCHINDUCTOR_CPP_MARCH": "native"},
        severity=Severity.ERROR,
        fix={"TORCHINDUCTOR_CPP_MARCH": None},
    ),
    Case(
        "policy",
        True,
        engine={"compilation-config": {"mode": 3, "inductor_passes": {"p": "evil.Pass"}}},
        severity=Severity.ERROR,
        fix={"compilation-config": {"mode": 3}},
        id="nested-field-removed-alone",
    ),
    Case("policy", False, env={"NCCL_MIN_NCHANNELS": "112"}, engine={"max-num-seqs": 8}),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case: Case) -> None:
    check_case(case)


def test_every_rule_has_a_firing_and_a_silent_case() -> None:
    from tests.test_rules_backends import CASES as BACKEND_CASES
    from tests.test_rules_fit_parallel import CASES as FIT_CASES
    from tests.test_rules_knowledge import CASES as KNOWLEDGE_CASES

    cases = FIRST_CASES + CASES + FIT_CASES + KNOWLEDGE_CASES + BACKEND_CASES
    firing = {c.rule for c in cases if c.fires}
    silent = {c.rule for c in cases if not c.fires}
    ids = {r.id for r in RULES}
    assert ids - firing == set(), "rules without a firing test"
    assert ids - silent == set(), "rules without a silent test"
