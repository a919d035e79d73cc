"""Attention-backend rules: availability, MLA vs MHA, AITER MLA block size, unified attention.

The attention backend decides most of a ROCm engine's speed and which other
knobs apply. A backend the target lacks, or one built for the other kind of
attention, makes vLLM refuse to start; these rules say so before the minutes
of loading a model are spent.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.rules.base import AITER, Context, rule
from tuner.rules.facts import (
    AITER_MLA_ANY_BLOCK_SIZE_SINCE,
    R0,
    R1,
    UNIFIED_BACKEND_SINCE,
    UNIFIED_ENV_IGNORED_SINCE,
)
from tuner.rules.types import Finding, Severity

UNIFIED_ENV = "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION"
UNIFIED_BACKEND = "ROCM_AITER_UNIFIED_ATTN"
PD_ENV = "VLLM_V1_USE_PREFILL_DECODE_ATTENTION"
BACKEND_SOURCE = f"{R1} §Attention backend selection with AITER"


def _is_mla_backend(name: str) -> bool:
    try:
        from tuner.knobs.value_sets import backend_is_mla
    except ImportError:
        return "MLA" in name
    return backend_is_mla(name)


def _backend_platforms(name: str) -> frozenset[str] | None:
    try:
        from tuner.knobs.value_sets import backend_platforms
    except ImportError:
        return None
    return backend_platforms(name)


@rule("attention-backend-unavailable")
def backend_unavailable(ctx: Context) -> Iterator[Finding]:
    """A backend the target platform or vLLM version does not have is an error."""
    name = ctx.backend
    if not name:
        return
    known = ctx.backends()
    platforms = _backend_platforms(name)
    where = f"vLLM {ctx.target.vllm_version}" if ctx.target.vllm_version else "the target vLLM"
    if known is not None and name not in known:
        yield Finding(
            Severity.ERROR,
            ("attention-backend",),
            f"{where} has no attention backend {name}"
            + _alternatives(ctx, known)
            + ("" if ctx.target.introspected else " (from tunelab's catalogue of vLLM releases)"),
            BACKEND_SOURCE,
            None,
        )
        return
    if ctx.platform and platforms is not None and ctx.platform not in platforms:
        yield Finding(
            Severity.ERROR,
            ("attention-backend",),
            f"attention backend {name} exists only on {', '.join(sorted(platforms))}; the target is "
            f"{ctx.platform}" + _alternatives(ctx, known),
            BACKEND_SOURCE,
            {"attention-backend": None},
        )


def _alternatives(ctx: Context, known: tuple[str, ...] | None) -> str:
    if not known or not ctx.platform:
        return ""
    mine = [b for b in known if ctx.platform in (_backend_platforms(b) or frozenset())]
    return f"; available on {ctx.platform}: {', '.join(mine)}" if mine else ""


@rule("attention-backend-vs-mla")
def backend_vs_mla(ctx: Context) -> Iterator[Finding]:
    """MLA backends only for MLA models, MHA backends only for the others."""
    name = ctx.backend
    if not name or ctx.model is None:
        return
    backend_mla = _is_mla_backend(name)
    if backend_mla and not ctx.model.is_mla:
        yield Finding(
            Severity.ERROR,
            ("attention-backend",),
            f"{name} is an MLA backend but {ctx.model.short_name} uses {ctx.model.attention} attention; "
            "pick an MHA backend (or leave attention-backend unset)",
            f"{R0} §Attention backend selection with AITER",
            {"attention-backend": None},
        )
    elif ctx.model.is_mla and not backend_mla:
        fix = "ROCM_AITER_MLA" if ctx.rocm else None
        yield Finding(
            Severity.ERROR,
            ("attention-backend",),
            f"{ctx.model.short_name} uses multi-head latent attention (MLA) but {name} is not an MLA "
            "backend" + (f"; use {fix}" if fix else ""),
            f"{R0} §Attention backend selection with AITER",
            {"attention-backend": fix},
        )


def _aiter_mla_selected(ctx: Context) -> bool:
    if ctx.backend:
        return ctx.backend == "ROCM_AITER_MLA"
    return bool(
        ctx.rocm
        and ctx.model is not None
        and ctx.model.is_mla
        and ctx.aiter_on
        and ctx.flag("VLLM_ROCM_USE_AITER_MLA", True)
    )


@rule("aiter-mla-block-size")
def aiter_mla_block_size(ctx: Context) -> Iterator[Finding]:
    """AITER MLA needed --block-size 1 before vLLM 0.11.1 (vLLM raised an error otherwise)."""
    if not ctx.rocm or not _aiter_mla_selected(ctx):
        return
    older = ctx.version_lt(AITER_MLA_ANY_BLOCK_SIZE_SINCE)
    if older is False:
        return
    block = ctx.int_value("block-size")
    if block == 1:
        return
    shown = "unset (16)" if block is None else str(block)
    version = (
        f"vLLM {ctx.target.vllm_version}"
        if older
        else f"vLLM before {AITER_MLA_ANY_BLOCK_SIZE_SINCE} (target version unknown)"
    )
    yield Finding(
        Severity.ERROR if older else Severity.WARNING,
        ("block-size", AITER, "VLLM_ROCM_USE_AITER_MLA"),
        f"AITER MLA in {version} requires --block-size 1 and raises an error otherwise; "
        f"block-size is {shown}",
        f"{R0} §AITER MLA requirements (DeepSeek-V3/R1 models); vllm-project/vllm PR #27715",
        {"block-size": 1},
    )


def _unified_env_ignored_since() -> str:
    """From the catalogue's ``no_effect_since`` when it has one, else facts.py's estimate."""
    try:
        from tuner.knobs import get
    except ImportError:
        return UNIFIED_ENV_IGNORED_SINCE
    knob = get(UNIFIED_ENV)
    since = knob.extra.get("no_effect_since") if knob is not None else None
    return str(since) if since else UNIFIED_ENV_IGNORED_SINCE


@rule("aiter-unified-attention")
def unified_attention(ctx: Context) -> Iterator[Finding]:
    """The unified-attention switch works only with AITER on, AITER MHA off, PD attention off."""
    if not ctx.flag(UNIFIED_ENV, False) or ctx.platform in {"cpu", "cuda"}:
        return
    if ctx.version_lt(_unified_env_ignored_since()) is False:
        yield Finding(
            Severity.WARNING,
            (UNIFIED_ENV, "attention-backend"),
            f"vLLM {ctx.target.vllm_version} no longer reads {UNIFIED_ENV} when choosing a backend; "
            f"select AITER unified attention with attention-backend {UNIFIED_BACKEND}",
            f"{R1} §Attention backend selection with AITER; vllm-project/vllm PR #35246",
            {UNIFIED_ENV: None, "attention-backend": UNIFIED_BACKEND, AITER: "1"},
        )
        return
    if not ctx.aiter_on:
        return  # aiter-subflag-without-master says it
    if ctx.flag("VLLM_ROCM_USE_AITER_MHA", True):
        yield Finding(
            Severity.WARNING,
            (UNIFIED_ENV, "VLLM_ROCM_USE_AITER_MHA"),
            f"{UNIFIED_ENV}=1 only takes effect with AITER MHA off; with VLLM_ROCM_USE_AITER_MHA "
            "on (its default) vLLM picks AITER MHA instead",
            f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
            {"VLLM_ROCM_USE_AITER_MHA": "0"},
        )
    if ctx.flag(PD_ENV, False):
        yield Finding(
            Severity.WARNING,
            (UNIFIED_ENV, PD_ENV),
            f"{UNIFIED_ENV}=1 needs unified attention mode, but {PD_ENV}=1 selects the "
            "prefill-decode split instead",
            f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
            {PD_ENV: None},
        )


def _env_available(ctx: Context, key: str) -> bool:
    try:
        from tuner.knobs import available, get
    except ImportError:
        return True
    knob = get(key)
    return knob is None or available(knob, ctx.target.vllm_version, ctx.platform).ok


@rule("gpt-oss-unified-attention")
def gpt_oss_unified(ctx: Context) -> Iterator[Finding]:
    """gpt-oss on ROCm is advised to run AITER unified attention."""
    if not ctx.rocm or ctx.model is None or not ctx.model.is_gpt_oss:
        return
    if ctx.effective_backend() == UNIFIED_BACKEND:
        return
    backends = ctx.backends()
    fix: dict[str, object] | None
    if backends is None or UNIFIED_BACKEND in backends:
        fix = {AITER: "1", "attention-backend": UNIFIED_BACKEND}
        how = f"set {AITER}=1 with attention-backend {UNIFIED_BACKEND}"
    elif _env_available(ctx, UNIFIED_ENV):
        fix = {AITER: "1", "VLLM_ROCM_USE_AITER_MHA": "0", UNIFIED_ENV: "1"}
        how = f"set {AITER}=1, VLLM_ROCM_USE_AITER_MHA=0, {UNIFIED_ENV}=1"
    else:
        fix = None
        how = (
            f"vLLM {ctx.target.vllm_version} has no way to select it; upgrade to "
            f"{UNIFIED_BACKEND_SINCE} or later"
        )
    yield Finding(
        Severity.ADVICE,
        ("attention-backend", AITER),
        f"gpt-oss models run best on AITER unified attention on ROCm: {how}",
        f"{R0} §Attention backend selection with AITER (Which backend should I choose?)",
        fix,
    )
