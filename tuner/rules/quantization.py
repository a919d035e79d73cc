"""Quantization rules: AWQ on ROCm, pre-quantized checkpoints, on-the-fly start-up cost.

A pre-quantized checkpoint already says how it is quantized; a different
``--quantization`` makes vLLM refuse it. On-the-fly quantization works but
costs minutes at every start, which matters for a tuning loop that restarts
the engine for each trial (000 §Quantization support).
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.rules.base import Context, rule
from tuner.rules.facts import AWQ_BF16_SINCE, R0
from tuner.rules.types import Finding, Severity
from tuner.vllm_tables import exact

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


QUANT_SOURCE = (
    "vLLM's ModelConfig._verify_quantization and the platform's supported_quantization "
    "(vllm/config/model.py, vllm/platforms/*.py), read per release"
)


@rule("quantization-unsupported-on-platform")
def unsupported_on_platform(ctx: Context) -> Iterator[Finding]:
    """A method the target platform's vLLM refuses: set, or the checkpoint's own."""
    release = exact(ctx.target.vllm_version)
    asked = _quant(ctx) or (ctx.model.quant_method if ctx.model else None)
    if release is None or not asked or not ctx.platform:
        return
    said = release.quantization_refusal(asked.lower(), ctx.platform)
    if said:
        yield Finding(
            Severity.ERROR,
            ("quantization",),
            f'vLLM {release.version} refuses to start: "{said}"'
            + ("" if _quant(ctx) else " (the checkpoint's own quantization)"),
            QUANT_SOURCE,
            None,
        )


@rule("quantization-deprecated")
def deprecated(ctx: Context) -> Iterator[Finding]:
    """A deprecated method without --allow-deprecated-quantization does not start."""
    release = exact(ctx.target.vllm_version)
    asked = _quant(ctx) or (ctx.model.quant_method if ctx.model else None)
    if release is None or not asked or ctx.flag("allow-deprecated-quantization", False):
        return
    said = release.deprecated_quantization(asked.lower())
    if said:
        yield Finding(
            Severity.ERROR,
            ("quantization", "allow-deprecated-quantization"),
            f'vLLM {release.version} refuses to start: "{said}"',
            QUANT_SOURCE,
            {"allow-deprecated-quantization": True},
        )


@rule("awq-on-rocm")
def awq_on_rocm(ctx: Context) -> Iterator[Finding]:
    """AWQ on ROCm: vLLM turns the Triton AWQ kernels on itself; bf16 activations from 0.24.

    Before, tunelab told the user VLLM_USE_TRITON_AWQ=1 was needed; vLLM sets
    it on ROCm when AWQ is used (rocm.py lines 1154-1159 in 0.32.0), so the
    variable is left alone. The dtype limit (000 §AWQ: auto or float16) holds
    only for releases whose AWQ reads fp16 activations alone.
    """
    method = _quant(ctx) or (ctx.model.quant_method if ctx.model else None)
    if not ctx.rocm or method not in {"awq", "awq_marlin"}:
        return
    dtype = str(ctx.config.engine.get("dtype") or "auto").lower()
    if dtype in {"auto", "float16", "half"}:
        return
    older = ctx.version_lt(AWQ_BF16_SINCE)
    if older is False:
        return
    yield Finding(
        Severity.ERROR if older else Severity.WARNING,
        ("dtype", "quantization"),
        f"AWQ requires dtype auto or float16 (activations in FP16), not {dtype}, in vLLM "
        + (ctx.target.vllm_version or f"before {AWQ_BF16_SINCE} (target version unknown)")
        + f"; from {AWQ_BF16_SINCE} AWQ also takes bfloat16",
        f"{R0} §AWQ (Activation-aware Weight Quantization); vLLM source "
        "model_executor/layers/quantization/auto_awq.py (0.32.0 line 229)",
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


# --quantization values vLLM can apply to an unquantized (BF16/FP16) checkpoint
# at load time (0.32 vllm/config/quantization.py _ONLINE_SHORTHANDS and
# ONLINE_QUANT_SHORTHAND_NAMES lines 192-231; fp8 is Fp8Config's dynamic path;
# ptpc_fp8 until 0.18, experts_int8 and bitsandbytes (until 0.28) quantize in flight too).
ONLINE_METHODS = frozenset(
    {
        "fp8",
        "fp8_per_tensor",
        "fp8_per_block",
        "fp8_per_channel",
        "ptpc_fp8",
        "mxfp8",
        "mxfp4",
        "int8_per_channel_weight_only",
        "nvfp4_per_token",
        "online",
        "experts_int8",
        "bitsandbytes",
    }
)


@rule("on-the-fly-quantization")
def on_the_fly(ctx: Context) -> Iterator[Finding]:
    """Quantizing an FP16/BF16 model at start-up adds minutes to every engine start."""
    asked = _quant(ctx)
    if not asked or ctx.model is None or ctx.model.is_prequantized or asked not in ONLINE_METHODS:
        return
    yield Finding(
        Severity.ADVICE,
        ("quantization",),
        f"quantization {asked} quantizes {ctx.model.short_name} at every start-up (two to five minutes "
        "on large models); for repeated trials or production restarts, use a pre-quantized model",
        f"{R0} §On-the-fly quantization",
        None,
    )


@rule("quantization-needs-checkpoint")
def needs_checkpoint(ctx: Context) -> Iterator[Finding]:
    """awq, gptq, compressed-tensors, quark ... read a quantized checkpoint; vLLM cannot make one.

    Before, tunelab said "quantizes at every start-up" for any method; vLLM
    fails to load a BF16 checkpoint with ``--quantization awq`` (no qweight
    tensors, no quantization_config).
    """
    asked = _quant(ctx)
    if not asked or ctx.model is None or ctx.model.is_prequantized or asked in ONLINE_METHODS:
        return
    yield Finding(
        Severity.ERROR,
        ("quantization",),
        f"{ctx.model.short_name} is not quantized, and quantization {asked} only reads a checkpoint "
        f"already quantized with {asked}; vLLM cannot quantize it at load time. Use a pre-quantized "
        "checkpoint, or an on-the-fly method (fp8, fp8_per_channel, mxfp4 ...)",
        "vLLM source vllm/config/quantization.py ONLINE_QUANT_SHORTHAND_NAMES (0.32.0 line 228); "
        f"{R0} §On-the-fly quantization",
        {"quantization": "fp8"},
    )
