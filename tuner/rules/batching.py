"""Batching rules: chunked prefill vs max-num-batched-tokens, max-model-len vs workload, MBT by goal.

The MBT direction follows vLLM (lower: better ITL; higher: better TTFT), not
the contradicting guidance list of 000; see :func:`mbt_by_goal`.

max-num-batched-tokens (MBT) trades time-to-first-token against inter-token
latency (000 §Configure --max-num-batched-tokens); with chunked prefill off it
must also hold a whole prompt, and max-model-len must hold a whole request.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.knobs.defaults import batch_defaults
from tuner.rules.base import Context, rule
from tuner.rules.facts import R0
from tuner.rules.types import GOALS, Finding, Severity
from tuner.vllm_tables import exact

MBT = "max-num-batched-tokens"
MBT_SOURCE = f"{R0} §Configure --max-num-batched-tokens"
CONFIG_SOURCE = "vLLM's SchedulerConfig validation (vllm/config/scheduler.py), read per release"


@rule("chunked-prefill-off-mbt")
def chunked_prefill_off(ctx: Context) -> Iterator[Finding]:
    """Without chunked prefill a prompt must fit one batch: MBT ≥ max-model-len."""
    if not ctx.is_set("enable-chunked-prefill") or ctx.flag("enable-chunked-prefill", True):
        return
    mbt = ctx.int_value(MBT)
    length = ctx.max_model_len
    if mbt is None or length is None or mbt >= length:
        return
    release = exact(ctx.target.vllm_version)
    said = (
        release.refusal(
            "mbt_below_max_model_len_without_chunked_prefill",
            max_num_batched_tokens=mbt,
            max_model_len=length,
        )
        if release
        else None
    )
    yield Finding(
        Severity.ERROR,
        (MBT, "enable-chunked-prefill", "max-model-len"),
        (
            f'with chunked prefill off vLLM {release.version} refuses to start: "{said}"'
            if release and said
            else f"with chunked prefill off, {MBT} ({mbt}) must be at least max-model-len "
            f"({length}); vLLM refuses to start otherwise"
        ),
        CONFIG_SOURCE if said else MBT_SOURCE,
        {MBT: length},
    )


@rule("mbt-below-max-num-seqs")
def mbt_below_max_num_seqs(ctx: Context) -> Iterator[Finding]:
    """Both batch knobs set with MBT below max-num-seqs: vLLM's SchedulerConfig refuses it.

    Only when both are set: vLLM clamps a defaulted max-num-seqs to MBT
    (engine/arg_utils.py ``_set_default_max_num_seqs_and_batched_tokens_args``).
    """
    if not (ctx.is_set(MBT) and ctx.is_set("max-num-seqs")):
        return
    mbt, seqs = ctx.int_value(MBT), ctx.int_value("max-num-seqs")
    release = exact(ctx.target.vllm_version)
    if mbt is None or seqs is None or mbt >= seqs or release is None:
        return
    said = release.refusal("mbt_below_max_num_seqs", max_num_batched_tokens=mbt, max_num_seqs=seqs)
    if said is None:
        return
    yield Finding(
        Severity.ERROR,
        (MBT, "max-num-seqs"),
        f'vLLM {release.version} refuses to start: "{said}" Raise {MBT} to at least {seqs} '
        "or lower max-num-seqs",
        CONFIG_SOURCE,
        {MBT: seqs},
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


SWEEP_HINT = f"tunelab sweep {MBT}=2048,4096,8192,16384,32768"


def effective_mbt(ctx: Context) -> tuple[int, str]:
    """MBT as set, else vLLM's default for the target release and GPU memory, and how it was found."""
    mbt = ctx.int_value(MBT)
    if mbt:
        return mbt, "set"
    plat = ctx.platform or "cuda"
    world = ctx.tp * ctx.pp
    got = batch_defaults(ctx.target.vllm_version or "", plat, ctx.target.vram_gib, world_size=world)
    where = f"vLLM {ctx.target.vllm_version or '(current)'} default on {got.tier} GPUs"
    if plat == "cpu":
        where = f"vLLM {ctx.target.vllm_version or '(current)'} default on CPU"
    return got.max_num_batched_tokens, where


@rule("mbt-by-goal")
def mbt_by_goal(ctx: Context) -> Iterator[Finding]:
    """MBT by goal, in vLLM's direction: lower → better ITL, higher → better TTFT and throughput.

    vLLM's docs (docs/configuration/optimization.md, "Performance tuning with
    chunked prefill") and the first bullets of 000 §Configure
    --max-num-batched-tokens agree: lower values improve ITL, higher values
    TTFT. The same section's guidance list (streaming 16k-32k) and its quick
    recipes (streaming 32k-64k, 000 §Backend choice quick recipes) say the
    opposite for streaming, so the reference contradicts itself; tunelab
    follows vLLM and points to a sweep. The default is not one number:
    ``tuner.knobs.defaults.batch_defaults`` (vLLM arg_utils.py get_batch_defaults).
    """
    goal = (ctx.workload.goal or "").lower() if ctx.workload else ""
    if goal not in GOALS or ctx.platform == "cpu":
        return
    mbt, how = effective_mbt(ctx)
    shown = f"{MBT} is {mbt}" + ("" if how == "set" else f" ({how})")
    sweep = f"; that guide disagrees with itself here, so measure: {SWEEP_HINT}"
    if goal == "streaming" and mbt > 8192:
        yield Finding(
            Severity.ADVICE,
            (MBT,),
            f"{shown} for the streaming goal: a lower MBT gives better inter-token latency (less "
            "prefill interrupting each decode step: vLLM's docs and the first bullets of "
            f"{R0} §Configure --max-num-batched-tokens), although its guidance list says "
            f"16k-32k{sweep}",
            MBT_SOURCE + "; vLLM docs/configuration/optimization.md §Chunked prefill",
            {MBT: 8192},
        )
    elif goal == "interactive" and mbt < 8192:
        yield Finding(
            Severity.ADVICE,
            (MBT,),
            f"{shown} for the interactive goal: a prompt longer than MBT takes several scheduler "
            f"steps to prefill, so time to first token grows; 8192 ({R0}: 8k-16k) is a better "
            f"start{sweep}",
            MBT_SOURCE,
            {MBT: 8192},
        )
    elif goal == "offline" and mbt < 32768:
        yield Finding(
            Severity.ADVICE,
            (MBT,),
            f"{shown} for the offline goal: MBT of 32k or more suits offline throughput "
            f"(diminishing returns beyond ~32k); confirm with {SWEEP_HINT}",
            MBT_SOURCE,
            {MBT: 32768},
        )
