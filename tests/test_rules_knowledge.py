"""Issue 14's new and changed rules, each firing and silent: ≥0.19 backend reality, GPU targets,
quantization families, shuffled KV layout, serving shape.

Cases share the format of ``tests/test_rules.py``; models that no published
config in tests/data covers (DeepSeek-V3.2's sparse attention, a head size
below 64, a vision-language model, a Quark MXFP4 checkpoint) are the published
configs with the keys that define them changed, registered in ``DERIVED``.
"""

from __future__ import annotations

import json
from functools import cache

import pytest

from tests.test_rules import (
    AITER_ON,
    CONFIGS,
    DERIVED,
    ROCM_012,
    ROCM_018,
    ROCM_NEW,
    Case,
    case_id,
    check_case,
    model,
    run,
)
from tuner.config import EngineConfig
from tuner.knobs.gpus import lookup
from tuner.model import ModelInfo, from_config
from tuner.rules import Severity, Target, WorkloadShape, check
from tuner.rules.base import Context


def _derived(base: str, name: str, **changes: object) -> ModelInfo:
    cfg = json.loads((CONFIGS / f"{base}.json").read_text())
    cfg.update(changes)
    return from_config(cfg, name=name, source="config-file", path=None)


@cache
def ds32() -> ModelInfo:
    """DeepSeek-V3.2's sparse attention: V3's shape plus the indexer keys."""
    return _derived(
        "deepseek-ai__DeepSeek-V3",
        "DeepSeek-V3.2-shaped",
        model_type="deepseek_v32",
        index_topk=2048,
        index_n_heads=64,
        index_head_dim=128,
    )


@cache
def small_heads() -> ModelInfo:
    """Llama-8B with 128 heads of 32 (head size below AITER FA's 64)."""
    return _derived(
        "meta-llama__Llama-3.1-8B-Instruct",
        "head32",
        num_attention_heads=128,
        num_key_value_heads=32,
        head_dim=32,
    )


@cache
def vision() -> ModelInfo:
    """A vision-language model: Qwen2.5-7B as the text part of a VL config."""
    text = json.loads((CONFIGS / "Qwen__Qwen2.5-7B-Instruct.json").read_text())
    cfg = {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "model_type": "qwen2_5_vl",
        "torch_dtype": "bfloat16",
        "text_config": text,
        "vision_config": {"depth": 32, "hidden_size": 1280},
    }
    return from_config(cfg, name="qwen-vl-shaped", source="config-file", path=None)


@cache
def quark_fp4() -> ModelInfo:
    """A Quark OCP MX checkpoint (amd/...-MXFP4 style) on the Llama-70B shape."""
    qcfg = {"quant_method": "quark", "global_quant_config": {"weight": {"dtype": "fp4"}}}
    return _derived(
        "meta-llama__Llama-3.1-70B-Instruct", "llama70b-mxfp4", quantization_config=qcfg
    )


DERIVED.update(ds32=ds32, head32=small_heads, vision=vision, quarkfp4=quark_fp4)

MI300X = Target("0.33.0", "rocm").with_gpu(lookup("MI300X"))
MI355X = Target("0.33.0", "rocm").with_gpu(lookup("MI355X"))
CPX = Target("0.33.0", "rocm").with_gpu(lookup("MI300X-CPX"))
SPEC3 = json.dumps({"method": "eagle3", "model": "d", "num_speculative_tokens": 3})

CASES = [
    # -- ROCm >= 0.19: ROCM_ATTN first ---------------------------------------------
    Case(
        "rocm-attn-default-backend",
        True,
        env=AITER_ON,
        target=ROCM_NEW,
        severity=Severity.WARNING,
        fix={"attention-backend": "ROCM_AITER_FA", "VLLM_ROCM_USE_AITER": "1"},
        id="aiter-alone-is-rocm-attn",
    ),
    Case(
        "rocm-attn-default-backend",
        True,
        target=ROCM_NEW,
        severity=Severity.ADVICE,
        id="aiter-off",
    ),
    Case(
        "rocm-attn-default-backend",
        False,
        env=AITER_ON,
        engine={"attention-backend": "ROCM_AITER_FA"},
        target=ROCM_NEW,
        id="explicit-backend",
    ),
    Case("rocm-attn-default-backend", False, env=AITER_ON, target=ROCM_018, id="0.18-aiter-fa"),
    Case("rocm-attn-default-backend", False, env=AITER_ON, model="ds3", target=ROCM_NEW, id="mla"),
    Case(
        "rocm-attn-default-backend",
        False,
        env=AITER_ON,
        model="oss",
        target=ROCM_NEW,
        id="sinks-skip-rocm-attn",
    ),
    Case(
        "rocm-attn-paged-fallback",
        True,
        engine={"attention-backend": "ROCM_ATTN"},
        model="head32",
        target=ROCM_NEW,
        severity=Severity.ADVICE,
    ),
    Case(
        "rocm-attn-paged-fallback",
        False,
        engine={"attention-backend": "ROCM_ATTN", "max-model-len": 32768},
        target=ROCM_NEW,
    ),
    Case(
        "dsa-sparse-mla-backend",
        True,
        env=AITER_ON,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        model="ds32",
        target=ROCM_NEW,
        severity=Severity.ERROR,
        fix={"attention-backend": "ROCM_AITER_MLA_SPARSE"},
    ),
    Case("dsa-sparse-mla-backend", False, env=AITER_ON, model="ds32", target=ROCM_NEW),
    Case(
        "dsa-sparse-mla-backend",
        False,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        model="ds3",
        target=ROCM_NEW,
        id="not-dsa",
    ),
    # -- quantization families --------------------------------------------------------
    Case(
        "quantization-needs-checkpoint",
        True,
        engine={"quantization": "awq"},
        model="llama70b",
        severity=Severity.ERROR,
        fix={"quantization": "fp8"},
    ),
    Case("quantization-needs-checkpoint", False, engine={"quantization": "fp8"}, model="llama70b"),
    Case(
        "quantization-needs-checkpoint",
        False,
        engine={"quantization": "fp8"},
        model="qwen3fp8",
        id="prequantized",
    ),
    Case(
        "on-the-fly-quantization",
        False,
        engine={"quantization": "gptq"},
        model="llama70b",
        id="gptq-is-not-on-the-fly",
    ),
    Case(
        "on-the-fly-quantization",
        True,
        engine={"quantization": "fp8_per_channel"},
        model="llama70b",
        target=ROCM_NEW,
        severity=Severity.ADVICE,
        id="fp8-per-channel",
    ),
    Case(
        "awq-on-rocm",
        True,
        engine={"quantization": "awq", "dtype": "bfloat16"},
        target=ROCM_012,
        severity=Severity.ERROR,
        fix={"dtype": "auto"},
        id="bf16-before-0.24",
    ),
    # -- shuffled KV layout -----------------------------------------------------------
    Case(
        "shuffle-kv-layout",
        True,
        env={**AITER_ON, "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
        engine={"attention-backend": "ROCM_AITER_FA", "speculative-config": SPEC3},
        target=ROCM_NEW,
        severity=Severity.ERROR,
        id="speculative-decoding",
    ),
    Case(
        "shuffle-kv-layout",
        True,
        env={**AITER_ON, "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
        engine={"attention-backend": "ROCM_AITER_FA"},
        model="head32",
        target=ROCM_NEW,
        severity=Severity.ERROR,
        id="head-size-32",
    ),
    Case(
        "shuffle-kv-layout",
        True,
        env={**AITER_ON, "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
        target=ROCM_NEW,
        severity=Severity.ADVICE,
        fix={"VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": None},
        id="rocm-attn-ignores-it",
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env={**AITER_ON, "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
        engine={"attention-backend": "ROCM_AITER_FA"},
        target=ROCM_NEW,
        id="aiter-fa-plain-model",
    ),
    # -- GPU targets --------------------------------------------------------------------
    Case(
        "mxfp4-not-native",
        True,
        model="quarkfp4",
        target=MI300X,
        severity=Severity.WARNING,
        id="quark-mxfp4-emulated-on-gfx942",
    ),
    Case("mxfp4-not-native", True, model="oss", target=MI300X, severity=Severity.ADVICE),
    Case("mxfp4-not-native", False, model="quarkfp4", target=MI355X, id="gfx950-native"),
    Case("mxfp4-not-native", False, model="quarkfp4", target=ROCM_NEW, id="gpu-unknown"),
    Case(
        "cpx-partition-tensor-parallel",
        True,
        engine={"tensor-parallel-size": 2},
        target=CPX,
        severity=Severity.WARNING,
        fix={"tensor-parallel-size": 1},
    ),
    Case("cpx-partition-tensor-parallel", False, target=CPX),
    Case(
        "nccl-min-nchannels-mi300",
        True,
        engine={"tensor-parallel-size": 8},
        target=MI300X,
        severity=Severity.ADVICE,
        fix={"NCCL_MIN_NCHANNELS": "112"},
    ),
    Case("nccl-min-nchannels-mi300", False, engine={"tensor-parallel-size": 8}, target=MI355X),
    Case("nccl-min-nchannels-mi300", False, target=MI300X, id="single-gpu"),
    Case(
        "quick-reduce-tp",
        True,
        engine={"tensor-parallel-size": 8},
        model="llama70b",
        target=MI300X,
        workload=WorkloadShape(1024, 1024, 256, "offline"),
        fix={"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "FP"},
    ),
    Case(
        "quick-reduce-tp",
        False,
        engine={"tensor-parallel-size": 2},
        model="llama70b",
        target=MI300X,
        workload=WorkloadShape(1024, 1024, 256, "offline"),
    ),
    # -- serving shape -------------------------------------------------------------------
    Case(
        "throughput-topology",
        True,
        engine={"tensor-parallel-size": 8},
        target=MI300X,
        workload=WorkloadShape(1024, 1024, 512, "offline"),
        fix={"tensor-parallel-size": 1, "data-parallel-size": 8},
    ),
    Case(
        "throughput-topology",
        True,
        target=MI300X,
        workload=WorkloadShape(1024, 256, 1, "interactive"),
        fix={"tensor-parallel-size": 8},
        id="latency-tp-node",
    ),
    Case(
        "throughput-topology",
        False,
        engine={"tensor-parallel-size": 8},
        model="ds3",
        target=MI300X,
        workload=WorkloadShape(1024, 1024, 512, "offline"),
        id="model-needs-the-node",
    ),
    Case(
        "throughput-topology",
        False,
        engine={"tensor-parallel-size": 1, "data-parallel-size": 8},
        target=MI300X,
        workload=WorkloadShape(1024, 1024, 512, "offline"),
        id="replicas-already",
    ),
    Case(
        "speculative-decoding",
        True,
        engine={"speculative-config": SPEC3},
        workload=WorkloadShape(512, 128, 8, "interactive"),
        severity=Severity.WARNING,
    ),
    Case(
        "speculative-decoding",
        True,
        engine={"speculative-config": SPEC3.replace("3}", "2}")},
        workload=WorkloadShape(512, 128, 256, "offline"),
        severity=Severity.ADVICE,
        fix={"speculative-config": None},
        id="high-concurrency",
    ),
    Case(
        "speculative-decoding",
        False,
        engine={"speculative-config": SPEC3.replace("3}", "2}")},
        workload=WorkloadShape(512, 128, 8, "interactive"),
    ),
    Case(
        "async-scheduling-by-goal",
        True,
        target=ROCM_NEW,
        workload=WorkloadShape(512, 128, 8, "interactive"),
        fix={"async-scheduling": False},
        id="default-on-interactive",
    ),
    Case(
        "async-scheduling-by-goal",
        True,
        engine={"async-scheduling": False},
        workload=WorkloadShape(512, 128, 256, "offline"),
        fix={"async-scheduling": True},
        id="off-offline",
    ),
    Case(
        "async-scheduling-by-goal",
        False,
        engine={"async-scheduling": False},
        target=ROCM_NEW,
        workload=WorkloadShape(512, 128, 8, "interactive"),
    ),
    Case(
        "max-num-seqs-below-concurrency",
        True,
        engine={"max-num-seqs": 64},
        workload=WorkloadShape(512, 128, 256),
        severity=Severity.WARNING,
        fix={"max-num-seqs": 256},
    ),
    Case(
        "max-num-seqs-below-concurrency",
        True,
        target=Target("0.32.0", "cuda", 1, 48.0),
        workload=WorkloadShape(512, 128, 512),
        fix={"max-num-seqs": 512},
        id="small-gpu-default-256",
    ),
    Case(
        "max-num-seqs-below-concurrency",
        False,
        engine={"max-num-seqs": 64, "data-parallel-size": 8},
        workload=WorkloadShape(512, 128, 256),
        id="dp-splits-requests",
    ),
    Case(
        "legacy-compilation-config-keys",
        True,
        engine={"compilation-config": {"full_cuda_graph": True}},
        target=ROCM_NEW,
        severity=Severity.ERROR,
        fix={"compilation-config": json.dumps({"cudagraph_mode": "FULL_AND_PIECEWISE"})},
    ),
    Case(
        "legacy-compilation-config-keys",
        False,
        engine={"compilation-config": {"cudagraph_mode": "FULL"}},
        target=ROCM_NEW,
    ),
    # -- all2all backends by version and platform ---------------------------------------
    Case(
        "all2all-backend-platform",
        True,
        engine={"all2all-backend": "deepep_low_latency", "data-parallel-size": 8},
        model="ds3",
        target=ROCM_NEW,
        severity=Severity.ERROR,
        fix={"all2all-backend": "allgather_reducescatter"},
    ),
    Case(
        "all2all-backend-platform",
        False,
        engine={"all2all-backend": "allgather_reducescatter", "data-parallel-size": 8},
        model="ds3",
        target=ROCM_NEW,
    ),
    Case(
        "all2all-backend-platform",
        False,
        engine={"all2all-backend": "mori_low_latency", "data-parallel-size": 8},
        model="ds3",
        target=ROCM_NEW,
        id="mori-on-rocm",
    ),
    Case(
        "value-not-in-version",
        True,
        engine={"all2all-backend": "mori", "data-parallel-size": 8},
        model="ds3",
        target=ROCM_NEW,
        severity=Severity.ERROR,
        id="mori-gone-in-0.32",
    ),
    Case(
        "value-not-in-version",
        False,
        engine={"all2all-backend": "mori", "data-parallel-size": 8},
        model="ds3",
        target=ROCM_018,
        id="mori-in-0.18",
    ),
    Case(
        "value-not-in-version",
        True,
        engine={"quantization": "ptpc_fp8"},
        model="llama70b",
        target=ROCM_NEW,
        severity=Severity.ERROR,
        fix={"quantization": "fp8_per_channel"},
        id="ptpc-fp8-is-fp8-per-channel",
    ),
    # FLEX_ATTENTION had a ROCm branch in 0.11-0.13 only.
    Case(
        "attention-backend-unavailable",
        False,
        engine={"attention-backend": "FLEX_ATTENTION"},
        target=Target("0.13.0", "rocm", 8, 192.0),
        id="flex-on-rocm-0.13",
    ),
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "FLEX_ATTENTION"},
        target=ROCM_NEW,
        severity=Severity.ERROR,
        id="flex-not-on-rocm-0.32",
    ),
    Case(
        "mm-encoder-data-parallel",
        True,
        engine={"tensor-parallel-size": 4},
        model="vision",
        target=ROCM_NEW,
        fix={"mm-encoder-tp-mode": "data"},
    ),
    Case(
        "mm-encoder-data-parallel",
        False,
        engine={"tensor-parallel-size": 4},
        model="llama8b",
        target=ROCM_NEW,
        id="text-only",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case: Case) -> None:
    check_case(case)


def _backend(env: dict[str, str], version: str, model: ModelInfo) -> str | None:
    config = EngineConfig(model="m", env=env)
    return Context(config, model, Target(version, "rocm", 8, 192.0), None).effective_backend()


def test_effective_backend_by_release() -> None:
    from tests.test_rules import model

    llama, oss, ds3 = model("llama8b"), model("oss"), model("ds3")
    unified = {**AITER_ON, "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1"}
    assert _backend(AITER_ON, "0.18.0", llama) == "ROCM_AITER_FA"
    # 0.11.1-0.18: unified attention is checked before MHA.
    assert _backend(unified, "0.12.0", llama) == "ROCM_AITER_UNIFIED_ATTN"
    # >= 0.19: ROCM_ATTN first; sink models skip it; DSA goes sparse.
    assert _backend(AITER_ON, "0.19.0", llama) == "ROCM_ATTN"
    assert _backend(unified, "0.33.0", llama) == "ROCM_ATTN"
    assert _backend(AITER_ON, "0.33.0", oss) == "ROCM_AITER_FA"
    assert _backend({}, "0.33.0", oss) == "ROCM_AITER_UNIFIED_ATTN"
    assert _backend(AITER_ON, "0.33.0", ds3) == "ROCM_AITER_MLA"
    assert _backend({}, "0.33.0", ds3) == "TRITON_MLA"
    assert _backend(AITER_ON, "0.33.0", ds32()) == "ROCM_AITER_MLA_SPARSE"


def test_rocm_attn_message_names_the_paged_attention_fallback() -> None:
    config = EngineConfig(model="m", env=dict(AITER_ON), engine={"max-model-len": 200000})
    found = check(config, model("llama8b"), ROCM_NEW)
    hit = next(f for f in found if f.rule == "rocm-attn-default-backend")
    assert "max-model-len 200,000" in hit.message and "#36702" in hit.source
    assert hit.fix == {"attention-backend": "ROCM_AITER_FA", "VLLM_ROCM_USE_AITER": "1"}
    # Head size 32: vLLM 0.32's ROCM_AITER_FA takes 64/128/256 (issue 27), so the fallback is
    # named without proposing a backend that would not start.
    found = check(config, small_heads(), Target("0.32.0", "rocm", 8, 192.0, gpu_arch="gfx942"))
    hit = next(f for f in found if f.rule == "rocm-attn-default-backend")
    assert "head size 32" in hit.message and "max-model-len 200,000" in hit.message
    assert hit.fix is None and "head_size not supported (32" in hit.message


def test_unified_env_cites_the_reorder_pr() -> None:
    case = Case(
        "aiter-unified-attention",
        True,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1"},
        target=ROCM_NEW,
    )
    hit = next(f for f in run(case) if f.rule == case.rule)
    assert "#36702" in hit.source and "#35246" not in hit.source


def test_stale_help_texts_are_gone() -> None:
    from tuner.knobs import get

    mla = get("VLLM_ROCM_USE_AITER_MLA")
    awq = get("VLLM_USE_TRITON_AWQ")
    ep = get("enable-expert-parallel")
    assert mla is not None and "before vLLM 0.11.1" in mla.help
    assert awq is not None and "required" not in awq.help and "itself" in awq.help
    assert ep is not None and "multi-node" not in ep.help
