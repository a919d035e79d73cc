"""Environment-variable knobs: AITER, other ROCm switches, HIP/RCCL and loader variables.

Help texts paraphrase the reference docs named in each ``source``; versions
(``since``/``until``) were read from ``vllm/envs.py`` of every vLLM release
0.10.0–0.33.0 (``docs/knob-versions.md``). ``since=None`` means the variable
is at least as old as 0.10.0, the oldest release tracked.
"""

from __future__ import annotations

from tuner.knobs.types import Knob, KnobKind, Platform, ValueType

R0 = "000_cadfc2653427814e.txt"
R1 = "001_0b441da10e6981c9.txt"
R2 = "002_61ffe81b0393820b.txt"
R3 = "003_383fc7ac89897e18.txt"

ROCM = (Platform.ROCM,)
GPU = (Platform.ROCM, Platform.CUDA)
AITER = "VLLM_ROCM_USE_AITER"
_SUB = {"parent": AITER}  # only has an effect while the master switch is on


def _aiter_flag(
    key: str, help_text: str, default: bool, source: str, since: str | None = None, **extra: object
) -> Knob:
    return Knob(
        key=key,
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="aiter",
        help=help_text,
        default=default,
        platforms=ROCM,
        since=since,
        source=source,
        extra={**_SUB, **extra},
    )


ENV_KNOBS: tuple[Knob, ...] = (
    # -- AITER -----------------------------------------------------------
    Knob(
        key=AITER,
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="aiter",
        help="Master switch for AITER's fused ROCm kernels; every VLLM_ROCM_USE_AITER_* flag needs it on.",
        default=False,
        platforms=ROCM,
        source=f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_LINEAR",
        "AITER quantization operators + GEMM for linear layers; recommended to keep on.",
        True,
        f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_MOE",
        "AITER fused-MoE kernels (routing + expert GEMMs); try AITER_ONLINE_TUNE=1 before turning off.",
        True,
        f"{R1} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_RMSNORM",
        "AITER RMSNorm kernels for the normalization layers; recommended to keep on.",
        True,
        f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_MLA",
        "AITER multi-head latent attention for MLA models (DeepSeek-V2/V3/R1); --block-size 1 only before vLLM 0.11.1.",
        True,
        f"{R0} §AITER MLA requirements (DeepSeek-V3/R1 models)",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_MHA",
        "AITER multi-head attention (ROCM_AITER_FA) for non-MLA models; 0 falls back to Triton backends.",
        True,
        f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION",
        "AITER's unified Triton attention kernel; only with AITER on and AITER MHA off (advised for gpt-oss).",
        False,
        f"{R0} §Attention backend technical details",
        since="0.11.1",
        # From 0.19.0 vllm/platforms/rocm.py no longer reads it when choosing the
        # backend; --attention-backend ROCM_AITER_UNIFIED_ATTN selects it instead.
        no_effect_since="0.19.0",
        use_instead="attention-backend=ROCM_AITER_UNIFIED_ATTN",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_FP8BMM",
        "AITER FP8 batched matmul fused with per-token quantization (MLA models such as DeepSeek-V3).",
        True,
        f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
        since="0.10.2",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_FP4BMM",
        "AITER FP4 batched matmul (MXFP4 models on MI350/MI355).",
        True,
        f"{R1} §Advanced: individual AITER flags",
        since="0.15.0",
    ),
    _aiter_flag(
        "VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS",
        "Fuse shared-expert computation into the AITER fused-MoE kernel.",
        False,
        f"{R1} §Advanced: individual AITER flags",
        since="0.11.1",
    ),
    Knob(
        key="VLLM_ROCM_USE_AITER_FP4_ASM_GEMM",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="aiter",
        help="AITER assembly (HIP) FP4 GEMM kernels for MXFP4-quantized models.",
        default=False,
        platforms=ROCM,
        since="0.11.0",
        until="0.33.0",
        source=f"{R1} §Advanced: individual AITER flags",
        extra={**_SUB, "absent_in": ("0.29.0", "0.30.0")},
    ),
    Knob(
        key="AITER_ONLINE_TUNE",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="aiter",
        help="Let AITER tune missing GEMM shapes at run time; the fix for 'wrong! device_gemm' before disabling AITER MoE.",
        default=False,
        platforms=ROCM,
        source=f"{R1} §AITER (AI Tensor Engine for ROCm) switches",
        extra={"read_by": "aiter"},  # read by the AITER library, not by vllm/envs.py
    ),
    # -- other ROCm kernels ---------------------------------------------
    Knob(
        key="VLLM_ROCM_USE_SKINNY_GEMM",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="rocm",
        help="Prefer skinny-GEMM kernels when the batch (M) is small; recommended to keep on.",
        default=True,
        platforms=ROCM,
        source=f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    Knob(
        key="VLLM_ROCM_FP8_PADDING",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="rocm",
        help="Pad FP8 linear weights for better memory locality (small memory cost).",
        default=True,
        platforms=ROCM,
        source=f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    Knob(
        key="VLLM_ROCM_MOE_PADDING",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="rocm",
        help="Pad MoE weights for better memory access (same trade-off as FP8 padding).",
        default=True,
        platforms=ROCM,
        source=f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    Knob(
        key="VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="rocm",
        help="Shuffled KV-cache layout; set for ROCM_AITER_FA at 32 or more concurrent requests.",
        default=False,
        platforms=ROCM,
        since="0.15.0",
        source=f"{R1} §AITER (AI Tensor Engine for ROCm) switches",
    ),
    Knob(
        key="VLLM_ROCM_CUSTOM_PAGED_ATTN",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="rocm",
        help="Custom ROCm paged-attention decode kernel used by the prefill-decode (ROCM_ATTN) backend.",
        default=True,
        platforms=ROCM,
        until="0.19.0",
        source=f"{R0} §Attention backend technical details",
    ),
    Knob(
        key="VLLM_V1_USE_PREFILL_DECODE_ATTENTION",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="attention",
        help="Split prefill/decode Triton attention instead of the unified kernel (renamed ROCM_ATTN).",
        default=False,
        platforms=ROCM,
        until="0.15.0",
        replacement="attention-backend=ROCM_ATTN",
        source=f"{R1} §Deprecated terms",
    ),
    Knob(
        key="VLLM_USE_TRITON_FLASH_ATTN",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="attention",
        help="Triton flash attention (1) or CK flash attention (0) in the old ROCm backend.",
        default=True,
        platforms=ROCM,
        until="0.11.1",
        replacement="VLLM_ROCM_USE_AITER=1",
        source=f"{R3} §Performance environment variables",
    ),
    Knob(
        key="VLLM_ATTENTION_BACKEND",
        kind=KnobKind.ENV,
        type=ValueType.CHOICE,
        group="attention",
        help="Force an attention backend by name (the environment form of --attention-backend).",
        platforms=(Platform.ANY,),
        until="0.15.0",
        replacement="attention-backend",
        source=f"{R1} §Attention backend selection with AITER",
        extra={"value_set": "attention_backends"},
    ),
    Knob(
        key="VLLM_USE_TRITON_AWQ",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="quantization",
        help="Triton AWQ kernels for AWQ on ROCm; vLLM turns it on itself there (rocm.py, 0.32).",
        default=False,
        platforms=ROCM,
        source=f"{R0} §AWQ (Activation-aware Weight Quantization)",
    ),
    # -- Quick Reduce ----------------------------------------------------
    Knob(
        key="VLLM_ROCM_QUICK_REDUCE_QUANTIZATION",
        kind=KnobKind.ENV,
        type=ValueType.CHOICE,
        group="parallelism",
        help="Quick Reduce all-reduce for large inputs: FP (fp16/bf16) or quantized INT8/INT6/INT4; helps TP 4-8.",
        default="NONE",
        choices=("NONE", "FP", "INT8", "INT6", "INT4", "INT3"),
        platforms=ROCM,
        source=f"{R0} §Quick Reduce (large all-reduces on ROCm)",
        extra={"choice_since": {"INT3": "0.26.0"}},
    ),
    Knob(
        key="VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="parallelism",
        help="Cast BF16 all-reduce input to FP16 for Quick Reduce (faster).",
        default=True,
        platforms=ROCM,
        source=f"{R0} §Quick Reduce (large all-reduces on ROCm)",
    ),
    Knob(
        key="VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB",
        kind=KnobKind.ENV,
        type=ValueType.INT,
        group="parallelism",
        help="Cap of the Quick Reduce buffer in MB (unset ≈ 2048 MB).",
        minimum=1,
        platforms=ROCM,
        source=f"{R0} §Quick Reduce (large all-reduces on ROCm)",
    ),
    Knob(
        key="VLLM_ALL2ALL_BACKEND",
        kind=KnobKind.ENV,
        type=ValueType.CHOICE,
        group="parallelism",
        help="All-to-all backend for expert/data parallel MoE; on ROCm use allgather_reducescatter.",
        choices=(
            "naive",
            "pplx",
            "deepep_high_throughput",
            "deepep_low_latency",
            "mori",
            "allgather_reducescatter",
        ),
        platforms=GPU,
        until="0.16.0",
        replacement="all2all-backend",
        source=f"{R0} §Data parallelism",
    ),
    # -- HIP, BLAS, RCCL, loader -----------------------------------------
    Knob(
        key="HIP_FORCE_DEV_KERNARG",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="environment",
        help="Put kernel arguments in device memory: faster kernel launches (set in ROCm vLLM images).",
        platforms=ROCM,
        source=f"{R0} §Performance environment variables",
        extra={"read_by": "hip"},
    ),
    Knob(
        key="TORCH_BLAS_PREFER_HIPBLASLT",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="environment",
        help="Prefer hipBLASLt over hipBLAS for GEMMs; can speed up linear layers.",
        platforms=ROCM,
        source=f"{R0} §Performance environment variables",
        extra={"read_by": "torch"},
    ),
    Knob(
        key="SAFETENSORS_FAST_GPU",
        kind=KnobKind.ENV,
        type=ValueType.BOOL,
        group="environment",
        help="GPU-accelerated safetensors loading: much shorter load time for large models.",
        platforms=GPU,
        source=f"{R1} §Performance environment variables",
        extra={"read_by": "safetensors"},
    ),
    Knob(
        key="NCCL_MIN_NCHANNELS",
        kind=KnobKind.ENV,
        type=ValueType.INT,
        group="environment",
        help="Minimum RCCL/NCCL channels (112 on MI300X); only helps with more than one GPU.",
        minimum=1,
        platforms=GPU,
        source=f"{R0} §Performance environment variables",
        extra={"read_by": "rccl", "multi_gpu_only": True},
    ),
    Knob(
        key="CUDA_VISIBLE_DEVICES",
        kind=KnobKind.ENV,
        type=ValueType.STR,
        group="environment",
        help="GPUs the engine may use (comma-separated indices); vLLM reads this one on ROCm too.",
        platforms=GPU,
        source="004_c4561cd56ddb4be5.txt §6. GPU Selection (Optional)",
        extra={"read_by": "vllm"},
    ),
    Knob(
        key="HIP_VISIBLE_DEVICES",
        kind=KnobKind.ENV,
        type=ValueType.STR,
        group="environment",
        help="HIP's GPU mask; vLLM on ROCm reads CUDA_VISIBLE_DEVICES, so prefer that one.",
        platforms=ROCM,
        source="004_c4561cd56ddb4be5.txt §6. GPU Selection (Optional)",
        extra={"read_by": "hip"},
    ),
)
