"""Memory rules: do weights plus KV cache fit the GPUs, and is the utilization sane?

Uses :func:`tuner.model.fit`, so the figures here are the ones ``tunelab
check`` and the TUI show. Silent without a model or without the GPU's memory:
a guess would be worse than nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from tuner.model.fit import GIB, fit
from tuner.model.info import ModelInfo, from_config
from tuner.rules.base import Context, rule
from tuner.rules.facts import MAX_RECOMMENDED_UTILIZATION, R0, R4
from tuner.rules.types import Finding, Severity

UTIL = "gpu-memory-utilization"
FIT_SOURCE = f"{R4} §5. How to Check if an LLM Fits within a CPX GPU?"


def _gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.1f} GiB"


# --quantization values that quantize a BF16/FP16 checkpoint to FP8 at load time.
_ONLINE_FP8 = {
    "fp8",
    "ptpc_fp8",
    "fbgemm_fp8",
    "fp8_per_tensor",
    "fp8_per_block",
    "fp8_per_channel",
}


def _with_online_quantization(ctx: Context) -> ModelInfo:
    """The model as it will sit in memory: on-the-fly FP8 halves the linear weights."""
    assert ctx.model is not None
    asked = str(ctx.config.engine.get("quantization") or "").lower()
    if asked not in _ONLINE_FP8 or ctx.model.is_prequantized or not ctx.model.config:
        return ctx.model
    quantized = from_config(
        {**ctx.model.config, "quantization_config": {"quant_method": "fp8"}},
        name=ctx.model.name,
        source=ctx.model.source,
        path=ctx.model.path,
    )
    return replace(ctx.model, weight_bytes=quantized.weight_bytes)


@rule("memory-fit")
def memory_fit(ctx: Context) -> Iterator[Finding]:
    """Weights + KV must fit VRAM × gpu-memory-utilization."""
    if ctx.model is None or not ctx.target.vram_gib or ctx.platform == "cpu":
        return
    util = float(ctx.value(UTIL, 0.9) or 0.9)
    need = None
    if ctx.workload and ctx.workload.concurrency:
        per_request = ctx.workload.sequence_len or ctx.max_model_len
        need = per_request * ctx.workload.concurrency if per_request else None
    model = _with_online_quantization(ctx)
    est = fit(
        model,
        gpus=ctx.target.gpus,
        vram_bytes_per_gpu=int(ctx.target.vram_gib * GIB),
        gpu_memory_utilization=util,
        tensor_parallel_size=ctx.tp,
        pipeline_parallel_size=ctx.pp,
        max_num_seqs=ctx.int_value("max-num-seqs"),
        max_model_len=ctx.max_model_len,
        kv_cache_dtype=str(ctx.value("kv-cache-dtype", "auto") or "auto"),
        tokens_needed=need,
    )
    knobs = ("tensor-parallel-size", UTIL, "max-model-len")
    if not est.weights_fit:
        group = ctx.tp * ctx.pp
        fix = None
        for tp in (2, 4, 8):
            if tp > group and tp * ctx.pp * ctx.dp <= ctx.target.gpus:
                per_gpu = model.weight_bytes / (tp * ctx.pp)
                if per_gpu + est.overhead_bytes_per_gpu < est.usable_bytes_per_gpu:
                    fix = {"tensor-parallel-size": tp}
                    break
        yield Finding(
            Severity.ERROR,
            knobs,
            f"{ctx.model.short_name} needs {_gib(est.weights_bytes_per_gpu)} of weights per GPU at "
            f"TP {ctx.tp}, more than the {_gib(est.usable_bytes_per_gpu)} vLLM may use "
            f"({ctx.target.vram_gib:g} GiB x {util:g}); "
            + ("raise tensor-parallel-size" if fix else "use more GPUs or a quantized model"),
            FIT_SOURCE,
            fix,
        )
        return
    if not est.holds_one_sequence:
        fit_len = (est.kv_tokens_fit // 1024) * 1024
        yield Finding(
            Severity.ERROR,
            knobs,
            f"after {_gib(est.weights_bytes_per_gpu)} of weights per GPU, the KV cache holds about "
            f"{est.kv_tokens_fit:,} tokens, less than one max-model-len sequence "
            f"({est.max_model_len:,}); vLLM refuses to start",
            FIT_SOURCE,
            {"max-model-len": fit_len} if fit_len >= 1024 else None,
        )
        return
    if not est.fits:
        what = "the workload" if need is not None else "max-num-seqs x max-model-len"
        yield Finding(
            Severity.WARNING if need is not None else Severity.ADVICE,
            ("max-num-seqs", "max-model-len", UTIL),
            f"the KV cache holds about {est.kv_tokens_fit:,} tokens per GPU but {what} asks for "
            f"{est.tokens_needed:,}; vLLM will run at most ~{est.max_concurrent_sequences} "
            "full-length sequences at once and queue the rest",
            f"{R0} §Configure --max-num-seqs",
            None,
        )


@rule("gpu-memory-utilization-high")
def utilization_high(ctx: Context) -> Iterator[Finding]:
    """Above 0.95 leaves too little for the runtime and other processes."""
    if not ctx.is_set(UTIL):
        return
    try:
        util = float(ctx.value(UTIL))
    except (TypeError, ValueError):
        return
    if util > MAX_RECOMMENDED_UTILIZATION:
        yield Finding(
            Severity.WARNING,
            (UTIL,),
            f"{UTIL} {util:g} is above the {MAX_RECOMMENDED_UTILIZATION} the reference recommends "
            "as a maximum; the engine risks out-of-memory errors under load",
            f"{R0} §Configure the gpu-memory-utilization parameter",
            {UTIL: MAX_RECOMMENDED_UTILIZATION},
        )
