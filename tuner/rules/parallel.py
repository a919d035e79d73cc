"""Parallelism rules: the GPU count, head divisibility, and expert parallelism by MoE density.

TP × PP × DP must fit the node and TP must divide the attention heads, or
vLLM refuses to start. Whether to add expert parallelism depends on how
sparse the MoE is (001 §Parallelism strategies, decision table).
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.rules.base import Context, rule
from tuner.rules.facts import EP_DENSITY_STANDARD, EP_DENSITY_ULTRA_SPARSE, HIGH_CONCURRENCY, R1
from tuner.rules.types import Finding, Severity

TP = "tensor-parallel-size"
EP = "enable-expert-parallel"
TABLE = f"{R1} §Parallelism strategies (run vLLM on multiple GPUs)"


@rule("parallel-size-vs-gpus")
def size_vs_gpus(ctx: Context) -> Iterator[Finding]:
    """TP × PP × DP above the GPU count cannot start."""
    if ctx.platform == "cpu" or ctx.world <= ctx.target.gpus:
        return
    fix_tp = max(1, ctx.target.gpus // (ctx.pp * ctx.dp))
    yield Finding(
        Severity.ERROR,
        (TP, "pipeline-parallel-size", "data-parallel-size"),
        f"the config needs {ctx.world} GPUs (TP {ctx.tp} x PP {ctx.pp} x DP {ctx.dp}) but the "
        f"target has {ctx.target.gpus}",
        f"{R1} §Tensor parallelism",
        {TP: fix_tp},
    )


@rule("tensor-parallel-divides-heads")
def tp_divides_heads(ctx: Context) -> Iterator[Finding]:
    """vLLM splits attention heads evenly across TP ranks."""
    if ctx.model is None or ctx.tp <= 1 or ctx.model.num_heads % ctx.tp == 0:
        return
    heads = ctx.model.num_heads
    fix = max(d for d in range(1, ctx.tp) if heads % d == 0)
    yield Finding(
        Severity.ERROR,
        (TP,),
        f"tensor-parallel-size {ctx.tp} does not divide the {heads} attention heads of "
        f"{ctx.model.short_name}; vLLM refuses to start",
        f"{R1} §Tensor parallelism",
        {TP: fix},
    )


@rule("moe-expert-parallel")
def expert_parallel(ctx: Context) -> Iterator[Finding]:
    """EP for standard-density MoE on several GPUs; not for ultra-sparse MoE."""
    model = ctx.model
    if model is None or model.moe is None or ctx.platform == "cpu":
        return
    density = model.moe.activation_density
    ep = ctx.flag(EP, False)
    multi = ctx.tp * ctx.dp > 1
    pct = f"{density * 100:.2g}%"
    if ep and density < EP_DENSITY_ULTRA_SPARSE:
        yield Finding(
            Severity.WARNING,
            (EP,),
            f"{model.short_name} activates {pct} of its experts per token (ultra-sparse, below 1%): "
            "expert parallelism's all-to-all costs more than it saves (7-12% slower); use TP or DP "
            "without EP",
            f"{R1} §Expert parallelism",
            {EP: False},
        )
    elif not ep and multi and density >= EP_DENSITY_STANDARD:
        high = (ctx.concurrency or 0) >= HIGH_CONCURRENCY
        if high:
            how = "DP + EP" if ctx.dp > 1 or model.is_mla else "TP + EP (or DP + EP)"
        else:
            how = "TP + EP"
        yield Finding(
            Severity.ADVICE,
            (EP, TP, "data-parallel-size"),
            f"{model.short_name} is a standard-density MoE ({pct} of experts per token): on "
            f"{ctx.tp * ctx.dp} GPUs the reference recommends {how} (--enable-expert-parallel)",
            TABLE,
            {EP: True},
        )
    if model.is_mla and ctx.tp > 1 and ctx.dp == 1 and (ctx.concurrency or 0) >= HIGH_CONCURRENCY:
        yield Finding(
            Severity.ADVICE,
            ("data-parallel-size", TP, EP),
            f"at {ctx.concurrency} concurrent requests, TP alone duplicates {model.short_name}'s MLA KV "
            "cache on every GPU; DP attention + EP partitions it (16-47% higher throughput at "
            ">=512 requests)",
            f"{R1} §Data Parallel Attention (advanced)",
            {"data-parallel-size": ctx.tp, TP: 1, EP: True},
        )
