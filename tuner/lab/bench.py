"""A benchmark of a server that is already running: what ``tunelab bench`` measures.

The faces measure an OpenAI-compatible server through :func:`measure`; it owns
how such a run goes (the load generator, its deadline and its failure limit),
which :func:`tuner.bench.runner.run_benchmark` decides, so no face imports the
runner. Trials, which start their own engine, go through :mod:`tuner.lab.run`.
"""

from __future__ import annotations

from tuner.bench.progress import ProgressCallback
from tuner.bench.run_limits import DEFAULT_MAX_CONSECUTIVE_FAILURES
from tuner.bench.runner import BenchResult, run_benchmark
from tuner.bench.workload import Workload

__all__ = ["BenchResult", "measure"]


async def measure(
    url: str,
    model: str | None,
    workload: Workload,
    *,
    on_progress: ProgressCallback | None = None,
    tokenizer_path: str | None = None,
    headers: dict[str, str] | None = None,
    deadline_s: float | None = None,
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES,
) -> BenchResult:
    """Benchmark the OpenAI-compatible server at ``url`` with ``workload`` (``tunelab bench``).

    The arguments, result and errors are :func:`tuner.bench.runner.run_benchmark`'s
    (headers are never printed or stored); the CLI calls this so no face imports the
    benchmark runner itself.
    """
    return await run_benchmark(
        url,
        model,
        workload,
        on_progress=on_progress,
        tokenizer_path=tokenizer_path,
        headers=headers,
        deadline_s=deadline_s,
        max_consecutive_failures=max_consecutive_failures,
    )
