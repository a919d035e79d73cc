"""Attention-backend rules: availability, MLA vs MHA, AITER MLA block size, unified attention.

The attention backend decides most of a ROCm engine's speed and which other
knobs apply. A backend the target lacks, or one built for the other kind of
attention, makes vLLM refuse to start; these rules say so before the minutes
of loading a model are spent.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.knobs import available, get
from tuner.knobs.value_sets import backend_is_mla, backend_platforms
from tuner.rules.backends import fix_refusal
from tuner.rules.base import AITER, Context, rule
from tuner.rules.facts import (
    AITER_MLA_ANY_BLOCK_SIZE_SINCE,
    R0,
    R1,
    ROCM_ATTN_CUSTOM_PA_SOURCE,
    ROCM_ATTN_FIRST_SINCE,
    ROCM_ATTN_FIRST_SOURCE,
    UNIFIED_BACKEND_SINCE,
    UNIFIED_ENV_IGNORED_SINCE,
)
from tuner.rules.types import Finding, Severity

UNIFIED_ENV = "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION"
UNIFIED_BACKEND = "ROCM_AITER_UNIFIED_ATTN"
PD_ENV = "VLLM_V1_USE_PREFILL_DECODE_ATTENTION"
BACKEND_SOURCE = f"{R1} §Attention backend selection with AITER"


@rule("attention-backend-unavailable")
def backend_unavailable(ctx: Context) -> Iterator[Finding]:
    """A backend the target platform or vLLM version does not have is an error."""
    name = ctx.backend
    if not name:
        return
    known = ctx.backends()
    platforms = backend_platforms(name, ctx.target.vllm_version)
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
    mine = [b for b in known if ctx.platform in (backend_platforms(b) or frozenset())]
    return f"; available on {ctx.platform}: {', '.join(mine)}" if mine else ""


@rule("attention-backend-vs-mla")
def backend_vs_mla(ctx: Context) -> Iterator[Finding]:
    """MLA backends only for MLA models, MHA backends only for the others."""
    name = ctx.backend
    if not name or ctx.model is None:
        return
    backend_mla = backend_is_mla(name)
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
    knob = get(UNIFIED_ENV)
    since = knob.extra.get("no_effect_since") if knob is not None else None
    return str(since) if since else UNIFIED_ENV_IGNORED_SINCE


@rule("aiter-unified-attention")
def unified_attention(ctx: Context) -> Iterator[Finding]:
    """The unified-attention switch: ignored from 0.19, honoured first in 0.11.1-0.18.

    Before, tunelab warned that the switch needs AITER MHA off; that was the
    selector the reference describes. In 0.11.1-0.18 vLLM checks it before MHA
    ("Priority 1 ... must check before MHA"), so AITER MHA on does not matter
    there; from 0.19 (PR #36702) the selector no longer reads it at all.
    """
    if not ctx.flag(UNIFIED_ENV, False) or ctx.platform in {"cpu", "cuda"}:
        return
    if ctx.version_lt(_unified_env_ignored_since()) is False:
        yield Finding(
            Severity.WARNING,
            (UNIFIED_ENV, "attention-backend"),
            f"vLLM {ctx.target.vllm_version} no longer reads {UNIFIED_ENV} when choosing a backend; "
            f"select AITER unified attention with attention-backend {UNIFIED_BACKEND} (keep "
            f"{AITER}=1: the explicit backend replaces attention only)",
            f"{R1} §Attention backend selection with AITER; {ROCM_ATTN_FIRST_SOURCE}",
            {UNIFIED_ENV: None, "attention-backend": UNIFIED_BACKEND, AITER: "1"},
        )
        return
    if not ctx.aiter_on:
        return  # aiter-subflag-without-master says it
    if ctx.version_lt(UNIFIED_BACKEND_SINCE) is not False and ctx.flag(PD_ENV, False):
        # Older (or unknown) selectors checked the prefill-decode split first.
        yield Finding(
            Severity.WARNING,
            (UNIFIED_ENV, PD_ENV),
            f"{UNIFIED_ENV}=1 needs unified attention mode, but {PD_ENV}=1 selects the "
            "prefill-decode split instead",
            f"{R0} §AITER (AI Tensor Engine for ROCm) switches",
            {PD_ENV: None},
        )


def _custom_paged_attention_misses(ctx: Context) -> list[str]:
    """Why ROCM_ATTN's custom paged attention would not apply (empty: it applies)."""
    model = ctx.model
    if model is None:
        return []
    why = []
    if model.head_dim not in (64, 128):
        why.append(f"head size {model.head_dim} (needs 64 or 128)")
    block = ctx.int_value("block-size")
    if block is not None and block not in (16, 32):
        why.append(f"block-size {block} (needs 16 or 32)")
    ratio = model.num_heads // max(model.num_kv_heads, 1)
    if ratio > 16:
        why.append(f"GQA ratio {ratio} (needs <= 16)")
    length = ctx.max_model_len
    if length and length > 128 * 1024:
        why.append(f"max-model-len {length:,} (needs <= 131,072)")
    if model.sliding_window:
        why.append("sliding-window layers")
    if model.has_sinks:
        why.append("attention sinks")
    return why


@rule("rocm-attn-default-backend")
def rocm_attn_default(ctx: Context) -> Iterator[Finding]:
    """vLLM ≥ 0.19 on ROCm picks ROCM_ATTN first: VLLM_ROCM_USE_AITER=1 alone is not AITER FA."""
    if ctx.backend or not ctx.rocm or ctx.effective_backend() != "ROCM_ATTN":
        return
    if ctx.version_lt(ROCM_ATTN_FIRST_SINCE) is not False:
        return  # older selectors: effective_backend reached ROCM_ATTN only when asked for it
    misses = _custom_paged_attention_misses(ctx)
    fallback = (
        f"; for this config its custom paged-attention kernel does not apply ({', '.join(misses)}), "
        "so decode runs its slower Triton fallback"
        if misses
        else ""
    )
    fix = {"attention-backend": "ROCM_AITER_FA", AITER: "1"}
    refused = fix_refusal(ctx, fix)
    if refused:  # AITER FA cannot take this model: only the fallback is worth saying
        if misses:
            yield Finding(
                Severity.ADVICE,
                ("attention-backend",),
                f"vLLM {ctx.target.vllm_version} runs ROCM_ATTN here{fallback}; ROCM_AITER_FA is "
                f"no alternative for this model (vLLM refuses {refused})",
                ROCM_ATTN_CUSTOM_PA_SOURCE,
                None,
            )
        return
    if ctx.aiter_on:
        head = (
            f"with {AITER}=1 alone vLLM {ctx.target.vllm_version} still selects ROCM_ATTN, not "
            "AITER FA: since 0.19 the ROCm selector tries ROCM_ATTN first (a regression by its "
            "maintainers' account; 2.7-4.4x lower throughput than AITER FA measured on "
            "Qwen3-235B). Set attention-backend ROCM_AITER_FA and keep "
            f"{AITER}=1 (GEMM, RMSNorm and MoE kernels still need the master switch)"
        )
        severity = Severity.WARNING
    else:
        head = (
            f"vLLM {ctx.target.vllm_version} on ROCm uses ROCM_ATTN by default; AITER FA "
            f"({AITER}=1 with attention-backend ROCM_AITER_FA) is usually faster on MI300-class GPUs"
        )
        severity = Severity.ADVICE
    yield Finding(
        severity,
        ("attention-backend", AITER),
        head + fallback,
        f"{ROCM_ATTN_FIRST_SOURCE}; {R1} §Attention backend selection with AITER",
        fix,
    )


@rule("rocm-attn-paged-fallback")
def rocm_attn_fallback(ctx: Context) -> Iterator[Finding]:
    """An explicit ROCM_ATTN whose custom paged attention cannot apply to this config."""
    if ctx.backend != "ROCM_ATTN" or not ctx.rocm:
        return
    misses = _custom_paged_attention_misses(ctx)
    if not misses:
        return
    yield Finding(
        Severity.ADVICE,
        ("attention-backend",),
        "ROCM_ATTN's custom paged-attention kernel needs head size 64/128, block size 16/32, "
        "GQA ratio <= 16, context <= 128k, no sliding window and no sinks; here "
        f"{', '.join(misses)}, so it falls back to a Triton kernel: compare with ROCM_AITER_FA "
        "or TRITON_ATTN",
        ROCM_ATTN_CUSTOM_PA_SOURCE,
        None,
    )


@rule("dsa-sparse-mla-backend")
def dsa_sparse_backend(ctx: Context) -> Iterator[Finding]:
    """DeepSeek sparse attention (V3.2) runs only on ROCM_AITER_MLA_SPARSE on ROCm."""
    if not ctx.rocm or ctx.model is None or not ctx.model.is_sparse_attention:
        return
    if ctx.backend in (None, "ROCM_AITER_MLA_SPARSE"):
        return
    yield Finding(
        Severity.ERROR,
        ("attention-backend",),
        f"{ctx.model.short_name} uses DeepSeek sparse attention (an indexer selects the tokens); "
        f"on ROCm vLLM has only ROCM_AITER_MLA_SPARSE for it, not {ctx.backend}",
        "vLLM source vllm/platforms/rocm.py _get_backend_priorities (use_sparse), 0.32.0 line 485",
        {"attention-backend": "ROCM_AITER_MLA_SPARSE"},
    )


def _env_available(ctx: Context, key: str) -> bool:
    """The env var exists in the target vLLM on its platform (an unknown key is not refused)."""
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
