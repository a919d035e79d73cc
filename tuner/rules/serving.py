"""Serving-shape rules: topology by goal, speculative decoding, async scheduling, batch room, legacy keys.

These are the guides' advice that depends on what will be served (the
workload's goal and concurrency) rather than on one knob: how to spend a
node's GPUs, when speculative decoding and async scheduling pay, whether
max-num-seqs admits the workload at all, and which compilation-config keys
vLLM 0.32 no longer accepts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from tuner.bounded import loads as json_loads
from tuner.model.fit import DEFAULT_OVERHEAD_BYTES, GIB, weights_per_gpu
from tuner.rules.base import Context, rule
from tuner.rules.facts import R0, R1, R2
from tuner.rules.memory import default_max_num_seqs, utilization
from tuner.rules.types import Finding, Severity
from tuner.vllm_tables import exact

TP = "tensor-parallel-size"
DP = "data-parallel-size"
SPEC = "speculative-config"
ASYNC = "async-scheduling"
COMP = "compilation-config"
# Async scheduling is on unless a feature rules it out (vllm/config/vllm.py
# lines 1585-1644 in 0.32.0: ``async_scheduling is None`` resolves to True).
# Earlier releases were not read, so the default is assumed only from here.
ASYNC_DEFAULT_ON_SINCE = "0.32.0"
# Speculative decoding pays at low concurrency ("effective concurrency ... from
# 16 to 64", 001 §Speculative decoding (experimental)).
SPEC_MAX_CONCURRENCY = 64
TOPOLOGY_SOURCE = (
    f"{R2} §Case 7: Performance Difference between TP 4 and TP 8; "
    f"{R1} §Maximizing instances per node"
)


def _json_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json_loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _fits_one_gpu(ctx: Context) -> bool:
    """The weights and one workload-length sequence's KV fit one GPU with room to batch."""
    if ctx.model is None or not ctx.target.vram_gib:
        return False
    usable = ctx.target.vram_gib * GIB * utilization(ctx)
    weights = weights_per_gpu(ctx.model)
    length = (ctx.workload.sequence_len if ctx.workload else None) or ctx.max_model_len or 8192
    kv = ctx.model.kv_bytes_per_token(str(ctx.value("kv-cache-dtype", "auto") or "auto"))
    # Room for at least 16 such sequences: a single-GPU replica that can batch.
    return weights + DEFAULT_OVERHEAD_BYTES + 16 * length * kv <= usable


@rule("throughput-topology")
def throughput_topology(ctx: Context) -> Iterator[Finding]:
    """A model that fits one GPU: replicas (TP=1) for throughput, TP across the node for latency."""
    goal = (ctx.workload.goal or "") if ctx.workload else ""
    if goal not in {"offline", "interactive"} or ctx.platform == "cpu" or not _fits_one_gpu(ctx):
        return
    assert ctx.model is not None
    if goal == "offline" and ctx.tp > 1 and ctx.pp == 1:
        replicas = ctx.tp * ctx.dp
        yield Finding(
            Severity.ADVICE,
            (TP, DP),
            f"{ctx.model.short_name} fits one GPU: for throughput, {replicas} single-GPU replicas "
            f"(tensor-parallel-size 1 with data-parallel-size {replicas}, or {replicas} separate "
            f"instances) usually beat one engine at TP {ctx.tp}",
            TOPOLOGY_SOURCE,
            {TP: 1, DP: replicas},
        )
    elif goal == "interactive" and ctx.tp == 1 and ctx.dp == 1 and ctx.target.gpus > 1:
        if (ctx.concurrency or 0) > 32:
            return
        tp = max(d for d in (2, 4, 8) if d <= ctx.target.gpus and ctx.model.num_heads % d == 0)
        yield Finding(
            Severity.ADVICE,
            (TP,),
            f"for the lowest latency at low concurrency, tensor parallelism across the node "
            f"(TP {tp}) shortens each token's step; replicas raise throughput, not speed",
            f"{R2} §Case 7: Performance Difference between TP 4 and TP 8",
            {TP: tp},
        )


@rule("speculative-decoding")
def speculative_decoding(ctx: Context) -> Iterator[Finding]:
    """At most 2 speculative tokens (acceptance falls beyond), and only at low concurrency."""
    spec = _json_dict(ctx.config.engine.get(SPEC))
    if not spec:
        return
    tokens = spec.get("num_speculative_tokens")
    source = f"{R0} §Speculative decoding (experimental)"
    if isinstance(tokens, int) and tokens > 2:
        yield Finding(
            Severity.WARNING,
            (SPEC,),
            f"num_speculative_tokens {tokens}: more draft tokens lower the acceptance rate and "
            "throughput; the guide's workaround is 2 or fewer",
            source,
            {SPEC: json.dumps({**spec, "num_speculative_tokens": 2})},
        )
    if (ctx.concurrency or 0) > SPEC_MAX_CONCURRENCY:
        yield Finding(
            Severity.ADVICE,
            (SPEC,),
            f"speculative decoding helps at low concurrency (an effective 16-64 requests); at "
            f"{ctx.concurrency} the spare compute it uses is already busy: measure it off",
            f"{R1} §Speculative decoding (experimental)",
            {SPEC: None},
        )


def _async_on(ctx: Context) -> bool | None:
    if ctx.is_set(ASYNC):
        return ctx.flag(ASYNC)
    return True if ctx.version_lt(ASYNC_DEFAULT_ON_SINCE) is False else None


@rule("async-scheduling-speculative-method")
def async_with_speculation(ctx: Context) -> Iterator[Finding]:
    """An explicit --async-scheduling with a speculative method it does not take: no start.

    Unset, vLLM turns async scheduling off by itself for such a method; set, it refuses
    (vllm/config/vllm.py; the methods and the sentence are the release's table's). From 0.33
    the refusal holds on the V1 model runner only: tunelab speaks when the config is known to
    run it (``VLLM_USE_V2_MODEL_RUNNER`` off, or a method the V2 runner lacks) and is silent
    where the runner depends on what it cannot see.
    """
    spec = _json_dict(ctx.config.engine.get(SPEC))
    release = exact(ctx.target.vllm_version)
    if not spec or not ctx.is_set(ASYNC) or not ctx.flag(ASYNC) or release is None:
        return
    found = release.config_refusals.get("async_scheduling_speculative") or {}
    method = str(spec.get("method") or "")
    if not found.get("spec_methods") or not method or method in found["spec_methods"]:
        return
    runner = ""
    if found.get("v1_runner_only"):
        env = str(ctx.config.env.get(found["runner_env"], "")).strip().lower()
        if env in ("0", "false"):
            runner = f" with {found['runner_env']}={env}"
        elif method in found.get("v2_unsupported_methods", ()):
            runner = f" ({method!r} runs on the V1 model runner: the V2 runner does not take it)"
        else:
            return
    message = str(found["message"]).replace("{method}", method)
    yield Finding(
        Severity.ERROR,
        (ASYNC, SPEC),
        f'vLLM {release.version} refuses to start{runner}: "{message}" (speculative method '
        f"{method!r}); drop --async-scheduling and vLLM turns it off for this method itself",
        "vLLM's VllmConfig async-scheduling check (vllm/config/vllm.py), read per release",
        {ASYNC: None},
    )


@rule("async-scheduling-by-goal")
def async_by_goal(ctx: Context) -> Iterator[Finding]:
    """Async scheduling: off for latency-sensitive serving, on for offline throughput (000)."""
    goal = (ctx.workload.goal or "") if ctx.workload else ""
    state = _async_on(ctx)
    if state is None or ctx.platform == "cpu":
        return
    default = "" if ctx.is_set(ASYNC) else f" (vLLM {ctx.target.vllm_version}'s default)"
    source = f"{R0} §Async scheduling; vLLM source vllm/config/vllm.py (0.32.0 lines 1585-1644)"
    if goal == "interactive" and state:
        yield Finding(
            Severity.ADVICE,
            (ASYNC,),
            f"async scheduling is on{default}: it trades time to first token for throughput; "
            "the guide prefers it off for latency-sensitive serving (A/B it)",
            source,
            {ASYNC: False},
        )
    elif goal == "offline" and not state:
        yield Finding(
            Severity.ADVICE,
            (ASYNC,),
            "async scheduling is off: for offline throughput the guide turns it on",
            source,
            {ASYNC: True},
        )


@rule("max-num-seqs-below-concurrency")
def seqs_below_concurrency(ctx: Context) -> Iterator[Finding]:
    """max-num-seqs (per DP rank) below the workload's concurrency queues the rest."""
    if not ctx.concurrency or (ctx.platform == "cpu" and not ctx.is_set("max-num-seqs")):
        return
    seqs = default_max_num_seqs(ctx)
    per_rank = math.ceil(ctx.concurrency / ctx.dp)
    if seqs >= per_rank:
        return
    how = "" if ctx.is_set("max-num-seqs") else " (vLLM's default for this GPU)"
    yield Finding(
        Severity.WARNING,
        ("max-num-seqs",),
        f"max-num-seqs is {seqs}{how} but the workload keeps {per_rank} requests in flight"
        + (" per DP rank" if ctx.dp > 1 else "")
        + f"; {per_rank - seqs} of them wait in the queue, so latency includes queueing",
        f"{R0} §Configure --max-num-seqs; {R2} §Case 8: Effect of Maximum Number of (Parallel) "
        "Sequences",
        {"max-num-seqs": per_rank},
    )


# compilation-config keys 0.32 no longer has, with their cudagraph_mode equivalent
# (vllm/config/compilation.py 0.32.0 has neither field, and vLLM's config classes
# forbid unknown keys: vllm/config/utils.py line 71, extra="forbid").
_LEGACY_KEYS = {
    "full_cuda_graph": ("cudagraph_mode", "FULL_AND_PIECEWISE"),
    "use_cudagraph": ("cudagraph_mode", "PIECEWISE"),
}
LEGACY_REJECTED_SINCE = "0.32.0"


@rule("legacy-compilation-config-keys")
def legacy_compilation_keys(ctx: Context) -> Iterator[Finding]:
    """full_cuda_graph / use_cudagraph: rejected by vLLM 0.32; cudagraph_mode replaces both."""
    comp = _json_dict(ctx.config.engine.get(COMP))
    if not comp:
        return
    old = [k for k in _LEGACY_KEYS if k in comp]
    if not old:
        return
    rejected = ctx.version_lt(LEGACY_REJECTED_SINCE) is not True
    migrated = {k: v for k, v in comp.items() if k not in _LEGACY_KEYS}
    for key in old:
        value = comp[key]
        mode = "NONE" if key == "use_cudagraph" and not value else _LEGACY_KEYS[key][1]
        if key == "full_cuda_graph" and not value:
            mode = "PIECEWISE"
        migrated.setdefault("cudagraph_mode", mode)
    yield Finding(
        Severity.ERROR if rejected else Severity.WARNING,
        (COMP,),
        f"compilation-config key{'s' if len(old) > 1 else ''} {', '.join(old)} "
        + (
            f"{'are' if len(old) > 1 else 'is'} rejected by vLLM {LEGACY_REJECTED_SINCE} and later"
            if rejected
            else "are deprecated"
        )
        + f"; use cudagraph_mode {migrated['cudagraph_mode']} instead",
        "vLLM source vllm/config/compilation.py (0.32.0: no such fields) and "
        f"vllm/config/utils.py line 71 (unknown keys forbidden); {R0} §CUDA graphs configuration",
        {COMP: json.dumps(migrated)},
    )


@rule("mm-encoder-data-parallel")
def mm_encoder_dp(ctx: Context) -> Iterator[Finding]:
    """Vision-language models under TP: run the vision encoder data-parallel (10-45% faster)."""
    if ctx.model is None or not ctx.model.is_multimodal or ctx.tp <= 1:
        return
    if ctx.is_set("mm-encoder-tp-mode") or ctx.version_lt("0.10.2"):
        return
    yield Finding(
        Severity.ADVICE,
        ("mm-encoder-tp-mode",),
        f"{ctx.model.short_name} has a vision encoder: under TP {ctx.tp}, mm-encoder-tp-mode data "
        "replaces its per-layer all-reduces with one all-gather (10-45% more throughput; the "
        "encoder's weights are replicated per GPU)",
        f"{R1} §Multimodal model optimization (vision-language)",
        {"mm-encoder-tp-mode": "data"},
    )
