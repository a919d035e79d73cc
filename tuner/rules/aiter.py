"""AITER rules: sub-flags need the master switch, MoE and FP8-KV caveats, shuffled KV layout.

AITER is ROCm's kernel library; vLLM reads one master switch and a family of
per-feature flags that do nothing on their own (000 §AITER switches). These
rules catch flags that will silently not apply, and the version-specific
combinations the reference docs warn about.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.knobs import available, get
from tuner.rules.base import AITER, Context, rule, truthy
from tuner.rules.facts import (
    AITER_FA_MIN_HEAD_SIZE,
    AITER_FP8_KV_SINCE,
    R0,
    R1,
    R3,
    SHUFFLE_KV_MIN_CONCURRENCY,
)
from tuner.rules.types import Finding, Severity

SHUFFLE = "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT"
SHUFFLE_SOURCE = "vLLM source vllm/v1/attention/backends/rocm_aiter_fa.py (0.32.0, ~1285 and ~1365)"


def _is_aiter_subflag(key: str) -> bool:
    """AITER feature flags: VLLM_ROCM_USE_AITER_* (and catalogue entries naming the parent)."""
    if key.startswith(AITER + "_"):
        return True
    knob = get(key)
    return bool(knob and knob.extra.get("parent") == AITER)


@rule("aiter-subflag-without-master")
def subflag_without_master(ctx: Context) -> Iterator[Finding]:
    """An AITER sub-flag set to 1 while the master switch is off does nothing."""
    if ctx.aiter_on or ctx.platform in {"cpu", "cuda"}:
        return  # on CPU/CUDA the platform rule already says ROCm knobs have no effect
    on = [k for k, v in sorted(ctx.config.env.items()) if _is_aiter_subflag(k) and truthy(v)]
    if on:
        yield Finding(
            Severity.WARNING,
            (AITER, *on),
            f"{', '.join(on)} {'has' if len(on) == 1 else 'have'} no effect while "
            f"{AITER} is off: every AITER feature flag needs the master switch on",
            f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
            {AITER: "1"},
        )


@rule("aiter-online-tune-before-disabling-moe")
def online_tune_first(ctx: Context) -> Iterator[Finding]:
    """Disabling AITER MoE should come after trying AITER_ONLINE_TUNE=1."""
    if not ctx.aiter_on or ctx.platform in {"cpu", "cuda"}:
        return
    moe_off = ctx.is_set("VLLM_ROCM_USE_AITER_MOE") and not ctx.flag("VLLM_ROCM_USE_AITER_MOE")
    if not moe_off or ctx.flag("AITER_ONLINE_TUNE", False):
        return
    if ctx.model is not None and not ctx.model.is_moe:
        return  # a dense model has no MoE kernels to lose
    yield Finding(
        Severity.ADVICE,
        ("VLLM_ROCM_USE_AITER_MOE", "AITER_ONLINE_TUNE"),
        "VLLM_ROCM_USE_AITER_MOE=0 gives up AITER's fused-MoE kernels; if it was set because of "
        "'RuntimeError: wrong! device_gemm ...', try AITER_ONLINE_TUNE=1 with MoE kernels on first",
        f"{R1} §AITER (AI Tensor Engine for ROCm) switches",
        {"AITER_ONLINE_TUNE": "1", "VLLM_ROCM_USE_AITER_MOE": None},
    )


@rule("aiter-fp8-kv-cache")
def fp8_kv_with_aiter(ctx: Context) -> Iterator[Finding]:
    """AITER attention did not support an FP8 KV cache before vLLM 0.10.0."""
    kv = str(ctx.value("kv-cache-dtype", "auto") or "auto").lower()
    if not kv.startswith("fp8") or not ctx.rocm or not ctx.aiter_on:
        return
    if ctx.model is not None and ctx.model.is_mla:
        return  # the known issue concerns AITER MHA
    if not ctx.flag("VLLM_ROCM_USE_AITER_MHA", True) and ctx.backend != "ROCM_AITER_FA":
        return
    older = ctx.version_lt(AITER_FP8_KV_SINCE)
    if older is False:
        return
    where = (
        f"vLLM {ctx.target.vllm_version}"
        if older
        else f"vLLM before {AITER_FP8_KV_SINCE} (target version unknown)"
    )
    yield Finding(
        Severity.ERROR if older else Severity.WARNING,
        ("kv-cache-dtype", AITER, "VLLM_ROCM_USE_AITER_MHA"),
        f"AITER attention does not support an FP8 KV cache in {where}; use kv-cache-dtype auto, "
        "or turn AITER MHA off (VLLM_ROCM_USE_AITER_MHA=0)",
        f"{R3} §Known Issues and Workarounds; vllm-project/vllm PR #20295",
        {"kv-cache-dtype": "auto"},
    )


def _shuffle_blockers(ctx: Context) -> list[str]:
    """What makes AITER FA's decode take the unified-attention path, where the shuffled layout asserts.

    vllm/v1/attention/backends/rocm_aiter_fa.py (0.32.0): sliding window, sinks
    or a multi-token decode (speculative decoding) ~line 1285-1293; head size
    below 64 ~line 1363-1370.
    """
    why = []
    model = ctx.model
    if model is not None and model.sliding_window:
        why.append("sliding-window layers")
    if model is not None and model.has_sinks:
        why.append("attention sinks")
    if ctx.config.engine.get("speculative-config"):
        why.append("speculative decoding (multi-token decode steps)")
    if model is not None and model.head_dim < AITER_FA_MIN_HEAD_SIZE:
        why.append(f"head size {model.head_dim} (below {AITER_FA_MIN_HEAD_SIZE})")
    return why


@rule("shuffle-kv-layout")
def shuffle_kv_layout(ctx: Context) -> Iterator[Finding]:
    """The shuffled KV layout: only ROCM_AITER_FA reads it, it asserts on some shapes, pays at 32+ requests."""
    if not ctx.rocm:
        return
    shuffle = ctx.flag(SHUFFLE, False)
    backend = ctx.effective_backend()
    blockers = _shuffle_blockers(ctx)
    if shuffle and backend is not None and backend != "ROCM_AITER_FA":
        yield Finding(
            Severity.ADVICE,
            (SHUFFLE, "attention-backend"),
            f"{SHUFFLE}=1 does nothing with {backend}: only ROCM_AITER_FA reads it",
            f"{SHUFFLE_SOURCE}; vllm/_aiter_ops.py line 2021",
            {SHUFFLE: None},
        )
        return
    if shuffle and blockers:
        yield Finding(
            Severity.ERROR if backend == "ROCM_AITER_FA" else Severity.WARNING,
            (SHUFFLE,),
            f"{SHUFFLE}=1 does not work with {', '.join(blockers)}"
            + (f" ({ctx.model.short_name})" if ctx.model else "")
            + ": vLLM's AITER FA backend sends those decodes to unified attention, which asserts "
            "on the shuffled layout at the first decode",
            SHUFFLE_SOURCE,
            {SHUFFLE: None},
        )
        return
    if shuffle or blockers or backend != "ROCM_AITER_FA":
        return
    if (ctx.concurrency or 0) < SHUFFLE_KV_MIN_CONCURRENCY:
        return
    knob = get(SHUFFLE)
    if knob is not None and not available(knob, ctx.target.vllm_version, ctx.platform).ok:
        return
    yield Finding(
        Severity.ADVICE,
        (SHUFFLE, "attention-backend"),
        f"at {ctx.concurrency} concurrent requests ROCM_AITER_FA usually gains from the shuffled "
        f"KV-cache layout ({SHUFFLE}=1; advised from {SHUFFLE_KV_MIN_CONCURRENCY})",
        f"{R1} §AITER (AI Tensor Engine for ROCm) switches",
        {SHUFFLE: "1"},
    )
