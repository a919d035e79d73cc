"""Memory rules: do weights plus KV cache fit the GPUs, and is the utilization sane?

Uses :func:`tuner.model.fit`, so the figures here are the ones ``tunelab
check`` and the TUI show. Silent without a model or without the GPU's memory:
a guess would be worse than nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from tuner.knobs.defaults import batch_defaults, gpu_memory_utilization_default
from tuner.model.fit import GIB, FitEstimate, fit, weights_per_gpu
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


def utilization(ctx: Context) -> float:
    """The config's gpu-memory-utilization, else the target release's default (0.92 from 0.32)."""
    if ctx.is_set(UTIL):
        try:
            return float(ctx.value(UTIL))
        except (TypeError, ValueError):
            pass
    return gpu_memory_utilization_default(ctx.target.vllm_version)


def default_max_num_seqs(ctx: Context) -> int:
    """max-num-seqs as set, else vLLM's default for this release and device (arg_utils.py)."""
    seqs = ctx.int_value("max-num-seqs")
    if seqs:
        return seqs
    plat = ctx.platform or "cuda"
    return batch_defaults(ctx.target.vllm_version or "", plat, ctx.target.vram_gib).max_num_seqs


def _estimate(ctx: Context, model: ModelInfo, need: int | None) -> FitEstimate:
    assert ctx.target.vram_gib is not None
    return fit(
        model,
        gpus=ctx.target.gpus,
        vram_bytes_per_gpu=int(ctx.target.vram_gib * GIB),
        gpu_memory_utilization=utilization(ctx),
        tensor_parallel_size=ctx.tp,
        pipeline_parallel_size=ctx.pp,
        data_parallel_size=ctx.dp,
        expert_parallel=ctx.flag("enable-expert-parallel", False),
        max_num_seqs=default_max_num_seqs(ctx),
        max_model_len=ctx.max_model_len,
        kv_cache_dtype=str(ctx.value("kv-cache-dtype", "auto") or "auto"),
        tokens_needed=need,
        requests=ctx.workload.concurrency if ctx.workload else None,
    )


def _weights_fix(ctx: Context, model: ModelInfo, est: FitEstimate) -> dict[str, object] | None:
    """The smallest change that makes the weights fit: a larger TP, or EP for a MoE under DP."""
    room = est.usable_bytes_per_gpu - est.overhead_bytes_per_gpu
    ep = ctx.flag("enable-expert-parallel", False)
    if model.is_moe and ctx.dp > 1 and not ep:
        shared = weights_per_gpu(
            model,
            tensor_parallel_size=ctx.tp,
            pipeline_parallel_size=ctx.pp,
            data_parallel_size=ctx.dp,
            expert_parallel=True,
        )
        if shared < room:
            return {"enable-expert-parallel": True}
    for tp in (2, 4, 8):
        if tp > ctx.tp and tp * ctx.pp * ctx.dp <= ctx.target.gpus:
            per_gpu = weights_per_gpu(
                model,
                tensor_parallel_size=tp,
                pipeline_parallel_size=ctx.pp,
                data_parallel_size=ctx.dp,
                expert_parallel=ep,
            )
            if per_gpu < room:
                return {"tensor-parallel-size": tp}
    return None


def _layout(ctx: Context) -> str:
    parts = [f"TP {ctx.tp}"]
    if ctx.pp > 1:
        parts.append(f"PP {ctx.pp}")
    if ctx.dp > 1:
        parts.append(f"DP {ctx.dp}")
    if ctx.flag("enable-expert-parallel", False):
        parts.append("EP")
    return ", ".join(parts)


def _workload_need(ctx: Context) -> tuple[int | None, int | None]:
    """Tokens one request holds and tokens the workload's concurrency needs (None: unknown)."""
    per_request = ctx.workload.sequence_len if ctx.workload else None
    if not (ctx.workload and ctx.workload.concurrency):
        return per_request, None
    per_request = per_request or ctx.max_model_len
    return per_request, (per_request * ctx.workload.concurrency if per_request else None)


def estimate(ctx: Context) -> FitEstimate | None:
    """The estimate memory-fit judges (online FP8, TP x PP x DP, the workload).

    The TUI's Model panel shows this same estimate (tuner.lab.fit), so the panel
    cannot say "fits" while the rule warns. None where the rule stays silent.
    """
    if ctx.model is None or not ctx.target.vram_gib or ctx.platform == "cpu":
        return None
    return _estimate(ctx, _with_online_quantization(ctx), _workload_need(ctx)[1])


@rule("memory-fit")
def memory_fit(ctx: Context) -> Iterator[Finding]:
    """Weights + KV must fit VRAM × gpu-memory-utilization, per GPU of the TP × PP × DP (EP) layout."""
    if ctx.model is None or not ctx.target.vram_gib or ctx.platform == "cpu":
        return
    util = utilization(ctx)
    per_request, need = _workload_need(ctx)
    model = _with_online_quantization(ctx)
    est = _estimate(ctx, model, need)
    knobs = ("tensor-parallel-size", UTIL, "max-model-len")
    if not est.weights_fit:
        fix = _weights_fix(ctx, model, est)
        if fix is None:
            advice = "use more GPUs or a quantized model"
        elif "enable-expert-parallel" in fix:
            advice = "enable expert parallelism so the routed experts are split over the DP ranks"
        else:
            advice = "raise tensor-parallel-size"
        yield Finding(
            Severity.ERROR,
            knobs + (("enable-expert-parallel",) if model.is_moe else ()),
            f"{ctx.model.short_name} needs {_gib(est.weights_bytes_per_gpu)} of weights per GPU at "
            f"{_layout(ctx)}, more than the {_gib(est.usable_bytes_per_gpu)} vLLM may use "
            f"({ctx.target.vram_gib:g} GiB x {util:g}); {advice}",
            FIT_SOURCE,
            fix,
        )
        return
    if not est.holds_one_sequence:
        fit_len = ((est.kv_tokens_fit - est.state_tokens_per_request) // 1024) * 1024
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
        per_rank = " per DP rank" if ctx.dp > 1 else ""
        length = per_request or est.max_model_len
        kind = "workload-length" if per_request else "full-length"
        state = est.state_tokens_per_request
        held = est.kv_tokens_fit // (length + state)
        cross = f" plus {state:,} of cross-attention each" if state else ""
        yield Finding(
            Severity.WARNING if need is not None else Severity.ADVICE,
            ("max-num-seqs", "max-model-len", UTIL),
            f"the KV cache holds about {est.kv_tokens_fit:,} tokens per GPU but {what} asks for "
            f"{est.tokens_needed:,}{per_rank}; vLLM will run at most ~{held} "
            f"{kind} sequences ({length:,} tokens{cross}) at once{per_rank} and queue the rest",
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
