"""Quantization rules: AWQ on ROCm, pre-quantized checkpoints, on-the-fly start-up cost.

A pre-quantized checkpoint already says how it is quantized; a different
``--quantization`` makes vLLM refuse it. On-the-fly quantization works but
costs minutes at every start, which matters for a tuning loop that restarts
the engine for each trial (000 §Quantization support).
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.rules.base import Context, rule
from tuner.rules.facts import R0
from tuner.rules.types import Finding, Severity

# --quantization values that read the same checkpoint format as the config's method.
_COMPATIBLE: dict[str, set[str]] = {
    "awq": {"awq", "awq_marlin", "auto_awq", "cpu_awq"},
    "gptq": {"gptq", "gptq_marlin", "gptq_marlin_24", "gptq_bitblas", "auto_gptq", "cpu_gptq"},
    "fp8": {"fp8", "fbgemm_fp8", "fp8_per_block", "fp8_per_tensor", "fp8_per_channel"},
    "compressed-tensors": {"compressed-tensors"},
    "quark": {"quark"},
    "mxfp4": {"mxfp4", "gpt_oss_mxfp4"},
}


def _quant(ctx: Context) -> str | None:
    raw = ctx.config.engine.get("quantization")
    return str(raw).strip().lower() if raw else None


@rule("awq-on-rocm")
def awq_on_rocm(ctx: Context) -> Iterator[Finding]:
    """AWQ on ROCm wants the Triton kernels and an fp16/auto activation dtype."""
    method = _quant(ctx) or (ctx.model.quant_method if ctx.model else None)
    if not ctx.rocm or method not in {"awq", "awq_marlin"}:
        return
    source = f"{R0} §AWQ (Activation-aware Weight Quantization)"
    if not ctx.flag("VLLM_USE_TRITON_AWQ", False):
        yield Finding(
            Severity.WARNING,
            ("VLLM_USE_TRITON_AWQ", "quantization"),
            "AWQ on ROCm needs VLLM_USE_TRITON_AWQ=1 to use the Triton AWQ kernels",
            source,
            {"VLLM_USE_TRITON_AWQ": "1"},
        )
    dtype = str(ctx.config.engine.get("dtype") or "auto").lower()
    if dtype not in {"auto", "float16", "half"}:
        yield Finding(
            Severity.ERROR,
            ("dtype", "quantization"),
            f"AWQ requires dtype auto or float16 (activations in FP16), not {dtype}",
            source,
            {"dtype": "auto"},
        )


@rule("prequantized-quantization-conflict")
def prequantized_conflict(ctx: Context) -> Iterator[Finding]:
    """A pre-quantized model with a different --quantization is refused by vLLM."""
    asked = _quant(ctx)
    if not asked or ctx.model is None or not ctx.model.quant_method:
        return
    have = ctx.model.quant_method
    if asked == have or asked in _COMPATIBLE.get(have, set()):
        return
    yield Finding(
        Severity.ERROR,
        ("quantization",),
        f"{ctx.model.short_name} is already quantized with {have}; quantization {asked} conflicts with "
        "its checkpoint. Leave quantization unset: vLLM reads the method from the model config",
        f"{R0} §Quark (AMD quantization toolkit)",
        {"quantization": None},
    )


@rule("on-the-fly-quantization")
def on_the_fly(ctx: Context) -> Iterator[Finding]:
    """Quantizing an FP16/BF16 model at start-up adds minutes to every engine start."""
    asked = _quant(ctx)
    if not asked or ctx.model is None or ctx.model.is_prequantized:
        return
    yield Finding(
        Severity.ADVICE,
        ("quantization",),
        f"quantization {asked} quantizes {ctx.model.short_name} at every start-up (two to five minutes "
        "on large models); for repeated trials or production restarts, use a pre-quantized model",
        f"{R0} §On-the-fly quantization",
        None,
    )
