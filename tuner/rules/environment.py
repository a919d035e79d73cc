"""Environment and availability rules: knobs the target vLLM lacks, ignores, or misreads.

A flag that a newer vLLM removed is silently ignored (env) or rejected
(argument); a ROCm flag on a CUDA or CPU node does nothing. Either way a
benchmark would not measure what the config says, so these rules name what
happens and what to use instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.knobs import AvailabilityStatus, available, get
from tuner.knobs.value_sets import ALL2ALL_PLATFORMS, REPLACEMENTS, lookup, values_for
from tuner.rules.base import Context, rule
from tuner.rules.facts import R1
from tuner.rules.types import Finding, Severity

# Choice knobs whose values change per vLLM version, with the Target field and
# the catalogue value set that list them. attention-backend has its own rule.
_VALUE_KNOBS = {
    "quantization": ("quantization_methods", "quantization_methods"),
    "kv-cache-dtype": ("kv_cache_dtypes", "kv_cache_dtypes"),
    "cudagraph-mode": ("cudagraph_modes", "cudagraph_modes"),
    "all2all-backend": ("all2all_backends", "all2all_backends"),  # no Target list: table only
}


def _set_keys(ctx: Context) -> list[str]:
    return sorted(ctx.config.env) + sorted(ctx.config.engine)


@rule("knob-not-in-version")
def knob_not_in_version(ctx: Context) -> Iterator[Finding]:
    """A knob removed from (or not yet in) the target vLLM; a removal names its replacement."""
    for key in _set_keys(ctx):
        knob = get(key)
        if knob is None:
            continue
        present = _introspected_presence(ctx, key)
        if present is True:
            continue  # the installed vLLM has it, whatever the catalogue says
        verdict = available(knob, ctx.target.vllm_version, None)
        if present is False and verdict.status is AvailabilityStatus.AVAILABLE:
            yield Finding(
                Severity.ERROR,
                (key,),
                f"the installed vLLM {ctx.target.vllm_version or ''} does not know {key} "
                "(introspection), although tunelab's catalogue lists it for this version",
                "introspection of the installed vLLM",
                {key: None},
            )
            continue
        if verdict.status is AvailabilityStatus.REMOVED:
            env = key.isupper()
            effect = "vLLM ignores it" if env else "vLLM rejects the argument"
            yield Finding(
                Severity.ERROR,
                (key,),
                f"{verdict.reason}; {effect}, so the run would not test it",
                knob.source or "tunelab knob catalogue",
                {key: None},
            )
        elif verdict.status is AvailabilityStatus.NOT_YET:
            yield Finding(
                Severity.ERROR,
                (key,),
                f"{verdict.reason}; upgrade vLLM or drop the knob",
                knob.source or "tunelab knob catalogue",
                {key: None},
            )


def _introspected_presence(ctx: Context, key: str) -> bool | None:
    """Whether the introspected vLLM has ``key``; None when introspection cannot say."""
    if not ctx.target.introspected:
        return None
    if key.isupper():
        names = ctx.target.env_vars
        return (key in names) if names is not None and key.startswith("VLLM_") else None
    args = ctx.target.engine_args
    if args is None or key in {"cudagraph-mode"}:
        return None
    return key in args or key.replace("-", "_") in args


@rule("knob-no-effect-on-platform")
def knob_no_effect(ctx: Context) -> Iterator[Finding]:
    """A ROCm-only (or CUDA-only) knob on another platform does nothing there."""
    if not ctx.platform:
        return
    for key in _set_keys(ctx):
        knob = get(key)
        if knob is None:
            continue
        verdict = available(knob, None, ctx.platform)
        if verdict.status is not AvailabilityStatus.NOT_APPLICABLE:
            continue
        where = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm"}.get(ctx.platform, ctx.platform)
        on_cpu = ctx.platform == "cpu"
        yield Finding(
            Severity.ADVICE if on_cpu else Severity.WARNING,
            (key,),
            f"{key} has no effect on {where}"
            + (
                "; it is kept in the config and rendered into exported presets for a GPU node"
                if on_cpu
                else f" ({verdict.reason})"
            ),
            knob.source or "tunelab knob catalogue",
            None if on_cpu else {key: None},
        )


@rule("value-not-in-version")
def value_not_in_version(ctx: Context) -> Iterator[Finding]:
    """A quantization method, KV-cache dtype or cudagraph mode the target vLLM lacks."""
    for key, (target_field, value_set) in _VALUE_KNOBS.items():
        raw = ctx.config.engine.get(key)
        if raw is None and key == "cudagraph-mode":
            comp = ctx.config.engine.get("compilation-config")
            raw = comp.get("cudagraph_mode") if isinstance(comp, dict) else None
        if raw is None:
            continue
        value = str(raw).strip()
        listed = getattr(ctx.target, target_field, None) or values_for(
            value_set, ctx.target.vllm_version
        )
        if value in listed or value.lower() in {v.lower() for v in listed}:
            continue
        entry = lookup(value_set, value)
        where = f"vLLM {ctx.target.vllm_version}" if ctx.target.vllm_version else "the target vLLM"
        if entry is not None and entry.until and ctx.version_lt(entry.until) is False:
            reason = f"{key} {value} was removed in vLLM {entry.until}"
        elif entry is not None and entry.since and ctx.version_lt(entry.since):
            reason = f"{key} {value} first appeared in vLLM {entry.since}"
        else:
            reason = f"{where} does not accept {key} {value}"
        successor = REPLACEMENTS.get(value_set, {}).get(value)
        if successor and successor in listed:
            reason += f"; use {key} {successor}, its successor"
        yield Finding(
            Severity.ERROR,
            (key,),
            f"{reason}; accepted: {_some(listed)}",
            "tunelab value sets (read from vLLM's source)"
            + ("" if not ctx.target.introspected else "; installed vLLM's own list"),
            {key: successor if successor and successor in listed else None},
        )


def _some(values: tuple[str, ...] | list[str], limit: int = 12) -> str:
    """The first ``limit`` values, and how many more (long lists drown the message)."""
    shown = ", ".join(values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


@rule("all2all-backend-platform")
def all2all_platform(ctx: Context) -> Iterator[Finding]:
    """An all2all backend whose kernels the target platform does not have (DeepEP on ROCm ...)."""
    raw = ctx.config.engine.get("all2all-backend")
    if raw is None or ctx.platform not in {"rocm", "cuda"}:
        return
    value = str(raw).strip()
    platforms = ALL2ALL_PLATFORMS.get(value)
    if platforms is None or ctx.platform in platforms:
        return
    where = {"cuda": "CUDA", "rocm": "ROCm"}[ctx.platform]
    yield Finding(
        Severity.ERROR,
        ("all2all-backend",),
        f"all2all-backend {value} needs {'/'.join(sorted(p.upper() for p in platforms))} kernels "
        f"that a {where} node does not have; allgather_reducescatter (vLLM's default) works on both",
        "vLLM source vllm/config/parallel.py ParallelConfig.all2all_backend (0.32.0 lines "
        f"219-233); {R1} §Data Parallel Attention (advanced)",
        {"all2all-backend": "allgather_reducescatter"},
    )


@rule("unread-env-var")
def unread_env_var(ctx: Context) -> Iterator[Finding]:
    """A VLLM_* variable the installed vLLM does not read (introspected targets only)."""
    names = ctx.target.env_vars
    if not names:
        return
    for key in sorted(ctx.config.env):
        # catalogue knobs are judged by knob-not-in-version (introspection first)
        if key.startswith("VLLM_") and key not in names and get(key) is None:
            yield Finding(
                Severity.WARNING,
                (key,),
                f"the installed vLLM {ctx.target.vllm_version or ''} does not read {key}; "
                "setting it changes nothing",
                "introspection of the installed vLLM (vllm/envs.py)",
                {key: None},
            )


@rule("hip-visible-devices")
def hip_visible_devices(ctx: Context) -> Iterator[Finding]:
    """vLLM on ROCm reads CUDA_VISIBLE_DEVICES; HIP_VISIBLE_DEVICES conflicts."""
    value = ctx.config.env.get("HIP_VISIBLE_DEVICES")
    if value is None or ctx.platform in {"cpu", "cuda"}:
        return
    fix: dict[str, object] = {"HIP_VISIBLE_DEVICES": None}
    if "CUDA_VISIBLE_DEVICES" not in ctx.config.env:
        fix["CUDA_VISIBLE_DEVICES"] = value
    yield Finding(
        Severity.WARNING,
        ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
        "vLLM on ROCm reads CUDA_VISIBLE_DEVICES; keep HIP_VISIBLE_DEVICES unset to avoid "
        "conflicting GPU selections",
        f"{R1} §Tensor parallelism",
        fix,
    )


@rule("nccl-channels-single-gpu")
def nccl_single_gpu(ctx: Context) -> Iterator[Finding]:
    """NCCL_MIN_NCHANNELS only helps multi-GPU collectives."""
    if "NCCL_MIN_NCHANNELS" not in ctx.config.env or ctx.world > 1:
        return
    yield Finding(
        Severity.ADVICE,
        ("NCCL_MIN_NCHANNELS",),
        "NCCL_MIN_NCHANNELS only helps multi-GPU runs (tensor or pipeline parallel); with one "
        "GPU it does nothing",
        f"{R1} §Performance environment variables",
        {"NCCL_MIN_NCHANNELS": None},
    )
