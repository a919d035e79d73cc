"""Batching rules: chunked prefill vs max-num-batched-tokens, max-model-len vs workload, MBT by goal.

max-num-batched-tokens (MBT) trades time-to-first-token against inter-token
latency (000 §Configure --max-num-batched-tokens); with chunked prefill off it
must also hold a whole prompt, and max-model-len must hold a whole request.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.rules.base import Context, rule
from tuner.rules.facts import R0
from tuner.rules.types import Finding, Severity

MBT = "max-num-batched-tokens"
MBT_SOURCE = f"{R0} §Configure --max-num-batched-tokens"


@rule("chunked-prefill-off-mbt")
def chunked_prefill_off(ctx: Context) -> Iterator[Finding]:
    """Without chunked prefill a prompt must fit one batch: MBT ≥ max-model-len."""
    if not ctx.is_set("enable-chunked-prefill") or ctx.flag("enable-chunked-prefill", True):
        return
    mbt = ctx.int_value(MBT)
    length = ctx.max_model_len
    if mbt is None or length is None or mbt >= length:
        return
    yield Finding(
        Severity.ERROR,
        (MBT, "enable-chunked-prefill", "max-model-len"),
        f"with chunked prefill off, {MBT} ({mbt}) must be at least max-model-len ({length}); "
        "vLLM refuses to start otherwise",
        MBT_SOURCE,
        {MBT: length},
    )


@rule("max-model-len-vs-workload")
def max_model_len_vs_workload(ctx: Context) -> Iterator[Finding]:
    """max-model-len must hold the workload's input + output."""
    need = ctx.workload.sequence_len if ctx.workload else None
    length = ctx.max_model_len
    if need is None or length is None or need <= length:
        return
    yield Finding(
        Severity.ERROR,
        ("max-model-len",),
        f"the workload needs {need} tokens per request (input + output) but max-model-len is "
        f"{length}; vLLM rejects such requests",
        f"{R0} §Configure --max-num-seqs",
        {"max-model-len": need},
    )


@rule("max-model-len-over-model")
def max_model_len_over_model(ctx: Context) -> Iterator[Finding]:
    """A max-model-len beyond the model's positions is refused by vLLM."""
    if ctx.model is None or not ctx.is_set("max-model-len"):
        return
    limit = ctx.model.max_position_embeddings
    length = ctx.int_value("max-model-len")
    if not limit or length is None or length <= limit:
        return
    yield Finding(
        Severity.ERROR,
        ("max-model-len",),
        f"max-model-len {length} is longer than {ctx.model.short_name} supports ({limit} positions); "
        "vLLM refuses it",
        f"{R0} §Configure --max-num-seqs",
        {"max-model-len": limit},
    )


# (low, high) MBT band per goal; None = unbounded (000 §Configure --max-num-batched-tokens).
_GOAL_BANDS: dict[str, tuple[int | None, int | None, str]] = {
    "interactive": (None, 16384, "keep MBT at 8k-16k or below for low time-to-first-token"),
    "streaming": (16384, 32768, "MBT 16k-32k suits streaming (low inter-token latency)"),
    "offline": (32768, None, "MBT of 32k or more suits offline throughput"),
}


@rule("mbt-by-goal")
def mbt_by_goal(ctx: Context) -> Iterator[Finding]:
    """MBT guidance by goal: interactive ≤ 8-16k, streaming 16-32k, offline ≥ 32k."""
    goal = (ctx.workload.goal or "").lower() if ctx.workload else ""
    if goal not in _GOAL_BANDS:
        return
    mbt = ctx.int_value(MBT, 8192)
    if mbt is None:
        return
    low, high, text = _GOAL_BANDS[goal]
    if low is not None and mbt < low:
        fix = low
    elif high is not None and mbt > high:
        fix = 8192 if goal == "interactive" else high
    else:
        return
    yield Finding(
        Severity.ADVICE,
        (MBT,),
        f"{MBT} is {mbt} for the {goal} goal: {text}",
        MBT_SOURCE,
        {MBT: fix},
    )
