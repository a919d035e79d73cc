"""Engine-argument knobs: the ``vllm serve`` flags that tuning touches.

Keys are the flags without dashes; ``cudagraph-mode`` is the ``cudagraph_mode``
field of ``--compilation-config`` (``tuner.config`` folds it in). Versions
were read from ``EngineArgs`` in ``vllm/engine/arg_utils.py`` of every vLLM
release 0.10.0–0.33.0 (``docs/knob-versions.md``); ``since=None`` means the
flag is at least as old as 0.10.0.
"""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

from tuner.knobs.env_knobs import R0, R1, R2, R3
from tuner.knobs.types import Knob, KnobKind, Platform, ValueType

GPU = (Platform.ROCM, Platform.CUDA)


class _KnobOptions(TypedDict, total=False):
    """The optional fields of :class:`Knob` an entry below may give."""

    default: Any
    choices: tuple[str, ...]
    minimum: float | None
    maximum: float | None
    platforms: tuple[Platform, ...]
    since: str | None
    until: str | None
    replacement: str | None
    extra: dict[str, Any]


def _engine(
    key: str,
    type_: ValueType,
    group: str,
    help_text: str,
    source: str,
    **kw: Unpack[_KnobOptions],
) -> Knob:
    return Knob(
        key=key, kind=KnobKind.ENGINE, type=type_, group=group, help=help_text, source=source, **kw
    )


ENGINE_KNOBS: tuple[Knob, ...] = (
    # -- attention ---------------------------------------------------------
    _engine(
        "attention-backend",
        ValueType.CHOICE,
        "attention",
        "Override the attention backend vLLM picks (ROCM_AITER_FA, ROCM_AITER_MLA, ROCM_ATTN, TRITON_ATTN, ...).",
        f"{R1} §Attention backend selection with AITER",
        since="0.13.0",
        extra={"value_set": "attention_backends"},
    ),
    _engine(
        "block-size",
        ValueType.INT,
        "attention",
        "Tokens per KV-cache block; the sizes each backend takes are vLLM's (`tunelab check`): "
        "in 0.32 ROCm MHA takes multiples of 16, AITER MLA any.",
        f"{R0} §AITER MLA requirements (DeepSeek-V3/R1 models)",
        minimum=1,
    ),
    # -- batching / scheduling -------------------------------------------
    _engine(
        "max-num-batched-tokens",
        ValueType.INT,
        "batching",
        "Tokens per scheduler step: lower favours ITL, higher favours TTFT/throughput (8k-16k chat, ≥32k offline).",
        f"{R0} §Configure --max-num-batched-tokens",
        minimum=1,
    ),
    _engine(
        "max-num-seqs",
        ValueType.INT,
        "batching",
        "Most sequences in one batch (concurrency); raise for throughput, lower to save memory.",
        f"{R0} §Configure --max-num-seqs",
        minimum=1,
    ),
    _engine(
        "enable-chunked-prefill",
        ValueType.BOOL,
        "batching",
        "Split long prefills into chunks mixed with decodes (on by default in V1).",
        f"{R2} §Case 1: Chunked Prefill",
    ),
    _engine(
        "enable-prefix-caching",
        ValueType.BOOL,
        "batching",
        "Reuse KV cache across requests sharing a prompt prefix.",
        f"{R2} §Case 3: Chunked Prefill and Prefix caching",
    ),
    _engine(
        "async-scheduling",
        ValueType.BOOL,
        "batching",
        "Overlap scheduling with execution: better throughput/ITL, a little worse TTFT.",
        f"{R0} §Async scheduling",
    ),
    _engine(
        "num-scheduler-steps",
        ValueType.INT,
        "batching",
        "Multi-step scheduling (V0): decode steps per scheduler call.",
        f"{R2} §Case 2: Number of scheduler steps",
        minimum=1,
        default=1,
        until="0.10.1",
        replacement="async-scheduling",
    ),
    # -- CUDA graphs ---------------------------------------------------------
    _engine(
        "cudagraph-mode",
        ValueType.CHOICE,
        "cudagraph",
        "CUDA/HIP graph mode: FULL_AND_PIECEWISE (default), PIECEWISE, FULL, FULL_DECODE_ONLY or NONE.",
        f"{R0} §CUDA graphs configuration",
        since="0.10.1",
        extra={"value_set": "cudagraph_modes", "compilation_field": "cudagraph_mode"},
    ),
    _engine(
        "compilation-config",
        ValueType.JSON,
        "cudagraph",
        "torch.compile / CUDA-graph settings as JSON; cudagraph-mode is folded into it.",
        f"{R0} §CUDA graphs configuration",
        extra={"example": '{"cudagraph_mode": "FULL_DECODE_ONLY"}'},
    ),
    _engine(
        "enforce-eager",
        ValueType.BOOL,
        "cudagraph",
        "Run eagerly without CUDA/HIP graphs (debugging; costs decode speed).",
        f"{R3} §vLLM engine performance settings",
        default=False,
    ),
    _engine(
        "max-seq-len-to-capture",
        ValueType.INT,
        "cudagraph",
        "Longest sequence covered by captured graphs (default 8192).",
        f"{R2} §Case 4: Max sequence length to capture",
        minimum=1,
        default=8192,
        until="0.11.0",
        replacement="compilation-config (max_cudagraph_capture_size)",
    ),
    # -- quantization ----------------------------------------------------------
    _engine(
        "quantization",
        ValueType.CHOICE,
        "quantization",
        "Weight quantization method; fp8/ptpc_fp8 quantize on the fly (minutes of start-up), others need a pre-quantized model.",
        f"{R0} §Supported quantization methods",
        extra={"value_set": "quantization_methods"},
    ),
    _engine(
        "kv-cache-dtype",
        ValueType.CHOICE,
        "quantization",
        "KV-cache element type; fp8 halves KV memory (fp8_e4m3 more precise, fp8_e5m2 more range).",
        f"{R0} §FP8 kv-cache dtype",
        default="auto",
        extra={"value_set": "kv_cache_dtypes"},
    ),
    _engine(
        "calculate-kv-scales",
        ValueType.BOOL,
        "quantization",
        "Compute FP8 KV-cache scales at run time when the model has no calibrated ones.",
        f"{R0} §FP8 kv-cache dtype",
        default=False,
        until="0.28.0",
    ),
    _engine(
        "dtype",
        ValueType.CHOICE,
        "quantization",
        "Activation/compute dtype; AWQ needs auto or float16.",
        f"{R0} §AWQ (Activation-aware Weight Quantization)",
        default="auto",
        choices=("auto", "half", "float16", "bfloat16", "float", "float32"),
    ),
    # -- memory ------------------------------------------------------------------
    _engine(
        "gpu-memory-utilization",
        ValueType.FLOAT,
        "memory",
        "Share of GPU memory vLLM may use (weights + KV cache); up to 0.95 for one instance, lower to pack several.",
        f"{R0} §Configure the gpu-memory-utilization parameter",
        default=0.9,
        minimum=0.01,
        maximum=1.0,
        extra={"default_by_version": {"0.10.0": 0.9, "0.32.0": 0.92}},
    ),
    _engine(
        "max-model-len",
        ValueType.INT,
        "memory",
        "Longest context (prompt + output) served; lower than the model's limit saves KV memory.",
        f"{R3} §vLLM engine performance settings",
        minimum=1,
    ),
    # -- parallelism -------------------------------------------------------------
    _engine(
        "tensor-parallel-size",
        ValueType.INT,
        "parallelism",
        "GPUs that split every layer; use when the model does not fit on one GPU (stay within 8 on MI300X).",
        f"{R0} §Tensor parallelism",
        default=1,
        minimum=1,
    ),
    _engine(
        "pipeline-parallel-size",
        ValueType.INT,
        "parallelism",
        "Pipeline stages (usually across nodes); TP within a node, PP across nodes.",
        f"{R0} §Pipeline parallelism",
        default=1,
        minimum=1,
    ),
    _engine(
        "data-parallel-size",
        ValueType.INT,
        "parallelism",
        "Model replicas for throughput when the model fits on one GPU or TP group.",
        f"{R0} §Data parallelism",
        default=1,
        minimum=1,
    ),
    _engine(
        "enable-expert-parallel",
        ValueType.BOOL,
        "parallelism",
        "Spread MoE experts over the TP x DP GPUs instead of splitting each expert; for standard-density MoE on one node too (DP+EP for MLA).",
        f"{R0} §Expert parallelism",
        default=False,
        platforms=GPU,
    ),
    _engine(
        "all2all-backend",
        ValueType.CHOICE,
        "parallelism",
        "All-to-all backend for expert/data-parallel MoE (default allgather_reducescatter); "
        "DeepEP/pplx/FlashInfer are CUDA-only, MoRI ROCm-only.",
        f"{R0} §Data parallelism",
        since="0.11.1",
        platforms=GPU,
        choices=(
            "naive",
            "pplx",
            "deepep_high_throughput",
            "deepep_low_latency",
            "deepep_v2",
            "mori",
            "mori_high_throughput",
            "mori_low_latency",
            "moonep",
            "nixl_ep",
            "allgather_reducescatter",
            "flashinfer_all2allv",
            "flashinfer_nvlink_two_sided",
            "flashinfer_nvlink_one_sided",
            "passthrough",
        ),
        # Per-version values: value_sets.ALL2ALL_BACKENDS (rule value-not-in-version);
        # not a "value_set" extra, which names an introspected list (introspect_compare).
    ),
    _engine(
        "disable-nccl-for-dp-synchronization",
        ValueType.BOOL,
        "parallelism",
        "Synchronise data-parallel ranks without NCCL/RCCL; recommended with DP on ROCm.",
        f"{R0} §Data parallelism",
        since="0.11.1",
        platforms=GPU,
    ),
    _engine(
        "mm-encoder-tp-mode",
        ValueType.CHOICE,
        "parallelism",
        "Vision encoder under TP: 'data' replicates it and splits the batch (10-45% faster for VL models).",
        f"{R1} §Multimodal model optimization (vision-language)",
        since="0.10.2",
        default="weights",
        choices=("weights", "data"),
    ),
    _engine(
        "speculative-config",
        ValueType.JSON,
        "speculative",
        "Speculative decoding as JSON (method, draft model, num_speculative_tokens ≤ 2 advised); helps at low concurrency.",
        f"{R0} §Speculative decoding (experimental)",
        extra={
            "example": '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", '
            '"num_speculative_tokens": 2}'
        },
    ),
)
