"""The load generator: workloads, the streaming client, metrics and runs.

Import what you need from the submodules; this package re-exports the common
names lazily so that ``import tuner.bench`` (e.g. for ``Workload``) does not
pull in the HTTP clients (httptools, httpx) until a run is actually made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.bench.workload import Workload, WorkloadError, parse_slo

if TYPE_CHECKING:
    from tuner.bench.errors import BenchError
    from tuner.bench.progress import BenchProgress
    from tuner.bench.runner import BenchResult, run_benchmark

__all__ = [
    "BenchError",
    "BenchProgress",
    "BenchResult",
    "Workload",
    "WorkloadError",
    "parse_slo",
    "run_benchmark",
]

_LAZY = {
    "BenchError": "tuner.bench.runner",
    "BenchResult": "tuner.bench.runner",
    "run_benchmark": "tuner.bench.runner",
    "BenchProgress": "tuner.bench.progress",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # Deferred: resolves the lazily named attribute.
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
