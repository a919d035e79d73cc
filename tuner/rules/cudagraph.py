"""CUDA-graph rules: the mode a config asks for against what its attention backend supports.

Not every backend can be captured in a full graph (000 §CUDA graphs
configuration). vLLM then either refuses to start or quietly runs another
mode; either way the benchmark would not measure what the user asked for, so
the rules say which happens.
"""

from __future__ import annotations

from collections.abc import Iterator

from tuner.knobs.value_sets import CUDAGRAPH_SUPPORT
from tuner.rules.base import Context, rule
from tuner.rules.facts import R0, TRITON_MLA_UNIFORM_SINCE
from tuner.rules.types import Finding, Severity

SOURCE = f"{R0} §CUDA graphs configuration"
FULL_MODES = {"FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"}


def _support(ctx: Context, backend: str) -> str | None:
    """full / uniform-batches / piecewise-only, or None when unknown."""
    support = CUDAGRAPH_SUPPORT.get(backend)
    if backend == "TRITON_MLA" and ctx.version_lt(TRITON_MLA_UNIFORM_SINCE) is False:
        return "uniform-batches"
    return support


def cudagraph_mode(ctx: Context) -> str | None:
    """The mode the config asks for (``cudagraph-mode`` or the compilation config's), upper-case."""
    raw = ctx.config.engine.get("cudagraph-mode")
    comp = ctx.config.engine.get("compilation-config")
    if raw is None and isinstance(comp, dict):
        raw = comp.get("cudagraph_mode")
    return str(raw).strip().upper() if raw else None


@rule("cudagraph-mode-vs-backend")
def mode_vs_backend(ctx: Context) -> Iterator[Finding]:
    """Full graphs on a backend that cannot take them: error or a silent downgrade."""
    mode = cudagraph_mode(ctx)
    backend = ctx.effective_backend()
    if mode not in FULL_MODES or not backend:
        return
    support = _support(ctx, backend)
    if support == "piecewise-only":
        if mode == "FULL":
            yield Finding(
                Severity.ERROR,
                ("cudagraph-mode", "attention-backend"),
                f"{backend} cannot run inside a full CUDA graph: vLLM refuses cudagraph_mode FULL "
                "with it and asks for PIECEWISE",
                SOURCE,
                {"cudagraph-mode": "PIECEWISE"},
            )
        else:
            yield Finding(
                Severity.WARNING,
                ("cudagraph-mode", "attention-backend"),
                f"{backend} must keep attention out of the graph: vLLM will run PIECEWISE instead "
                f"of {mode}, so a benchmark of {mode} measures PIECEWISE",
                SOURCE,
                {"cudagraph-mode": "PIECEWISE"},
            )
    elif support == "uniform-batches" and mode == "FULL":
        yield Finding(
            Severity.WARNING,
            ("cudagraph-mode", "attention-backend"),
            f"{backend} supports full CUDA graphs for uniform (decode) batches only: vLLM will "
            "downgrade FULL to FULL_AND_PIECEWISE (or FULL_DECODE_ONLY)",
            SOURCE,
            {"cudagraph-mode": "FULL_AND_PIECEWISE"},
        )


@rule("cudagraph-mode-with-enforce-eager")
def mode_with_eager(ctx: Context) -> Iterator[Finding]:
    """enforce-eager turns graphs off whatever cudagraph-mode says."""
    mode = cudagraph_mode(ctx)
    if ctx.flag("enforce-eager", False) and mode and mode != "NONE":
        yield Finding(
            Severity.WARNING,
            ("cudagraph-mode", "enforce-eager"),
            f"enforce-eager disables CUDA graphs, so cudagraph-mode {mode} has no effect",
            SOURCE,
            {"enforce-eager": False},
        )
