"""Attention-backend validity as vLLM's own classes decide it, for the target's release.

Whether a backend can take the model at all (head size, KV-cache dtype, block size, MLA,
sinks, attention type, GPU architecture, KV connectors) is read from the release's generated
table (:mod:`tuner.vllm_tables.attention`), never from the guides. Three rules: a backend the
config names that vLLM would refuse, (on ROCm and CUDA) a layer no backend in the priority
list takes, and a backend or cudagraph mode the platform's vLLM replaces with its own (CPU). The same facts validate every fix the other rules propose (:func:`fix_refusal`), so a
suggested backend is one vLLM starts with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tuner.knobs.value_sets import backend_platforms
from tuner.rules.backend_facts import BACKEND_KEYS, attention_table, layer_facts, rocm_pick
from tuner.rules.base import AITER, Context, rule
from tuner.rules.cudagraph import cudagraph_mode
from tuner.rules.types import Finding, Severity
from tuner.vllm_tables import exact
from tuner.vllm_tables.attention import CUDA_SOURCE, ROCM_SOURCE, SOURCE

PLATFORM_SOURCE = "vLLM's platform classes (vllm/platforms/*.py; scripts/vllm_platforms.py)"
# Where else a config can name the same setting (the fix clears them all).
_ALIASES = {"attention-backend": ("VLLM_ATTENTION_BACKEND",)}


def _why(reasons: Mapping[str, list[str]]) -> str:
    return "; ".join(f"{name}: {', '.join(r)}" for name, r in reasons.items())


@rule("attention-backend-invalid")
def backend_invalid(ctx: Context) -> Iterator[Finding]:
    """A backend the config names that vLLM's own checks refuse for this model and target."""
    name, facts, release = ctx.backend, layer_facts(ctx), exact(ctx.target.vllm_version)
    table = release.attention if release is not None else None
    if not name or facts is None or release is None or table is None:
        return
    reasons = table.invalid_reasons(name, facts)
    if not reasons:
        return
    fix: dict[str, Any] | None = None
    tail = ""
    if ctx.rocm or ctx.cuda:
        picked, _ = rocm_pick(ctx, table, facts) if ctx.rocm else table.cuda_choice(facts)
        if picked:
            tail = f"; without the override vLLM picks {picked}"
            fix = dict.fromkeys(k for k in BACKEND_KEYS if ctx.is_set(k))
    yield Finding(
        Severity.ERROR,
        ("attention-backend",),
        f"vLLM {ctx.target.vllm_version or release.version} refuses attention backend {name} "
        f"for this model: {'; '.join(reasons)} — the engine would not start{tail}",
        SOURCE,
        fix,
    )


@rule("attention-no-valid-backend")
def no_valid_backend(ctx: Context) -> Iterator[Finding]:
    """On ROCm or CUDA, no backend in the release's priority list takes the model's layers."""
    facts, table = layer_facts(ctx), attention_table(ctx)
    if ctx.backend or not (ctx.rocm or ctx.cuda) or facts is None or table is None:
        return
    picked, passed = rocm_pick(ctx, table, facts) if ctx.rocm else table.cuda_choice(facts)
    if picked is None and passed:
        knobs = tuple(k for k in ("kv-cache-dtype", "block-size") if ctx.is_set(k))
        yield Finding(
            Severity.ERROR,
            knobs or ((AITER,) if ctx.rocm else ("attention-backend",)),
            f"no attention backend of vLLM's {'ROCm' if ctx.rocm else 'CUDA'} list takes this "
            f"model with this config, so vLLM refuses to start ({_why(passed)})",
            ROCM_SOURCE if ctx.rocm else CUDA_SOURCE,
            None,
        )


def fix_refusal(ctx: Context, fix: Mapping[str, Any]) -> str | None:
    """Why vLLM would refuse the backend a fix sets (None when it takes it or cannot tell)."""
    if not any(k in fix for k in (*BACKEND_KEYS, "kv-cache-dtype", "block-size")):
        return None
    fixed = Context(ctx.config.with_values(fix), ctx.model, ctx.target, ctx.workload)
    name, facts, table = fixed.backend, layer_facts(fixed), attention_table(fixed)
    if facts is None or table is None:
        return None
    if name:
        reasons = table.invalid_reasons(name, facts)
        return f"{name}: {', '.join(reasons)}" if reasons else None
    if fixed.rocm or fixed.cuda:
        picked, passed = rocm_pick(fixed, table, facts) if fixed.rocm else table.cuda_choice(facts)
        return _why(passed) if picked is None and passed else None
    return None


@rule("platform-overrides-value")
def platform_overrides(ctx: Context) -> Iterator[Finding]:
    """A backend or cudagraph mode the target platform's vLLM replaces with its own.

    Read from the platform classes of the target's release (tuner.vllm_tables
    ``platforms``): on CPU vLLM runs CPU_ATTN (or its MLA backends) whatever
    ``--attention-backend`` says and NONE whatever ``cudagraph-mode`` says. The run
    would start, and measure something other than what the config asks for.
    """
    release = exact(ctx.target.vllm_version)
    if release is None or not ctx.platform:
        return
    backend = ctx.backend
    where = backend_platforms(backend) if backend else None
    if where is not None and ctx.platform not in where:
        backend = None  # a backend of other platforms: attention-backend-unavailable says so
    asked = {"attention-backend": backend, "cudagraph-mode": cudagraph_mode(ctx)}
    for knob, value in asked.items():
        why = release.platform_override(knob, value, ctx.platform) if value else None
        if why:
            yield Finding(
                Severity.WARNING,
                (knob,),
                f"{knob} {value} has no effect here: {why}",
                PLATFORM_SOURCE,
                dict.fromkeys(k for k in (knob, *_ALIASES.get(knob, ())) if ctx.is_set(k)),
            )
