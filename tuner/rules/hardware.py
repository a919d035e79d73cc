"""GPU-target rules: what the GPU model itself changes (MXFP4 support, CPX partitions, RCCL, Quick Reduce).

The target's GPU comes from ``tunelab check --gpu NAME`` or the node's
telemetry (:mod:`tuner.knobs.gpus`). Every rule here is silent when the GPU is
unknown: a guess about hardware would be worse than saying nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.rules.base import Context, rule
from tuner.rules.facts import R0, R1, R3, R4
from tuner.rules.types import Finding, Severity

QR = "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION"
NCCL = "NCCL_MIN_NCHANNELS"
# RCCL channel advice is for these boards (001 §Performance environment variables:
# "to 112 on the Instinct MI300X/MI325X").
_NCCL_112_GPUS = {"MI300X", "MI325X", "MI308X"}
MX_SOURCE = (
    "vLLM source model_executor/layers/quantization/quark/schemes/quark_ocp_mx.py (0.32.0 "
    "line 90) and platforms/rocm.py supports_mx() (line 1180: gfx95x only)"
)


def _quark_fp4(ctx: Context) -> bool:
    """A Quark OCP MX checkpoint with FP4 weights (e.g. amd/...-MXFP4)."""
    model = ctx.model
    if model is None or model.quant_method != "quark" or not model.config:
        return False
    qcfg = model.config.get("quantization_config") or {}
    weight = (qcfg.get("global_quant_config") or {}).get("weight") or {}
    if isinstance(weight, list):
        weight = weight[0] if weight else {}
    return str(weight.get("dtype") or "").lower().startswith(("fp4", "mx"))


@rule("mxfp4-not-native")
def mxfp4_not_native(ctx: Context) -> Iterator[Finding]:
    """MXFP4 maths is native on gfx950 only; on gfx942 Quark MXFP4 is emulated."""
    arch = ctx.target.gpu_arch or ""
    if not ctx.rocm or not arch or arch.startswith("gfx95"):
        return
    gpu = ctx.target.gpu_name or arch
    asked = str(ctx.config.engine.get("quantization") or "").lower()
    if _quark_fp4(ctx) or asked == "mxfp4":
        yield Finding(
            Severity.WARNING,
            ("quantization",),
            f"MXFP4 on {gpu} ({arch}) runs emulated: vLLM dequantizes the weights and "
            "quantize-dequantizes activations, computing the linear layers in high precision "
            "(slower than BF16, no memory-bandwidth win beyond storage); native MXFP4 needs "
            "gfx950 (MI350X/MI355X). Prefer an FP8 checkpoint here",
            MX_SOURCE,
            None,
        )
    elif ctx.model is not None and ctx.model.quant_method == "mxfp4":
        yield Finding(
            Severity.ADVICE,
            ("quantization",),
            f"{ctx.model.short_name}'s MXFP4 experts run on {gpu} ({arch}) as W4A16 (weights "
            "unpacked to BF16 in the MoE kernel): it saves memory, not FP4 compute, which needs "
            "gfx950 (MI350X/MI355X)",
            "vLLM source model_executor/layers/fused_moe/oracle/mxfp4.py (0.32.0 line 152: "
            "aiter Triton W4A16 on gfx942)",
            None,
        )


@rule("cpx-partition-tensor-parallel")
def cpx_tensor_parallel(ctx: Context) -> Iterator[Finding]:
    """Under CPX the references disagree on TP: 003 says TP=1 only, 004 splits models with TP."""
    if (ctx.target.partition or "").upper() != "CPX" or ctx.tp <= 1:
        return
    yield Finding(
        Severity.WARNING,
        ("tensor-parallel-size",),
        f"tensor-parallel-size {ctx.tp} on CPX partitions ({ctx.target.vram_gib:g} GiB each): "
        f"{R3} §CPX mode says only TP=1 is supported (CPX-NPS1; run several instances instead), "
        f"while {R4} §5 splits models across CPX partitions with TP (CPX/NPS4). The references "
        "disagree: verify on your partition mode before relying on TP here",
        f"{R3} §CPX mode; {R4} §5. How to Check if an LLM Fits within a CPX GPU?",
        {"tensor-parallel-size": 1},
    )


@rule("nccl-min-nchannels-mi300")
def nccl_channels(ctx: Context) -> Iterator[Finding]:
    """TP > 1 on MI300X/MI325X: NCCL_MIN_NCHANNELS=112 (RCCL's default is 32-64 channels)."""
    if not ctx.rocm or ctx.tp * ctx.pp <= 1 or ctx.target.gpu_name not in _NCCL_112_GPUS:
        return
    if NCCL in ctx.config.env:
        return
    yield Finding(
        Severity.ADVICE,
        (NCCL,),
        f"with {ctx.tp * ctx.pp} GPUs per model on {ctx.target.gpu_name}, set {NCCL}=112: RCCL "
        "opens 32-64 channels by default, and more channels speed up the all-reduces of "
        "tensor parallelism",
        f"{R1} §Performance environment variables; {R0} §Performance environment variables",
        {NCCL: "112"},
    )


@rule("quick-reduce-tp")
def quick_reduce(ctx: Context) -> Iterator[Finding]:
    """Quick Reduce helps throughput at TP 4-8 with many concurrent requests."""
    if not ctx.rocm or not 4 <= ctx.tp <= 8:
        return
    if str(ctx.config.env.get(QR, "NONE")).upper() != "NONE":
        return
    goal = (ctx.workload.goal or "") if ctx.workload else ""
    if goal != "offline" and (ctx.concurrency or 0) < 64:
        return
    yield Finding(
        Severity.ADVICE,
        (QR,),
        f"at tensor-parallel-size {ctx.tp} with many concurrent requests, Quick Reduce usually "
        f"speeds up the large all-reduces: try {QR}=FP (INT8/INT6/INT4 quantize the reduction; "
        "check accuracy) in an A/B trial",
        f"{R0} §Quick Reduce (large all-reduces on ROCm); {R3} §What is New",
        {QR: "FP"},
    )
