"""Capacity under an SLO as both faces start it: the defaults, the grid and the probe workload.

``tunelab capacity`` and the TUI's capacity job (``k``) build their search
here, so a capacity asked from either face uses the same SLO parsing, the
same load grid, the same launches and probes, and the same goodput bounds on
every probe; the search itself is :mod:`tuner.studies.capacity_run`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.studies.capacity import By, CapacityError, CapacityReport, Grid, LaunchCapacity
from tuner.studies.capacity_run import DEFAULT_PROBES, run_capacity
from tuner.studies.capacity_search import CapacitySearchReport, run_capacity_search
from tuner.studies.slo import SLO, SLOError, parse_slo
from tuner.studies.space import Space
from tuner.trials.events import (
    TrialDone,
    TrialEvent,
    TrialEventCallback,
    TrialFailed,
    TrialSkipped,
)
from tuner.trials.model import Trial

if TYPE_CHECKING:
    # Deferred: the executor loads the engine and benchmark stack; not at a command's start.
    from tuner.studies.executor import TrialRunner

LAUNCHES = 3
PROBES = DEFAULT_PROBES
LIMIT = 1024.0
# What the TUI's dialog offers first: vLLM's spelling, the bound most chat services quote.
SUGGESTED_SLO = "p99_ttft_ms<=500"


def grid(
    by: str = "concurrency",
    *,
    start: float | None = None,
    limit: float = LIMIT,
    step: float | None = None,
) -> Grid:
    """The loads the search may try: one user (or 0.5 req/s) resolution by default.

    Raises:
        CapacityError: An unknown ``by`` or a grid that cannot hold a search.
    """
    unit = step if step is not None else (1.0 if by == "concurrency" else 0.5)
    if by not in ("concurrency", "rate"):
        raise CapacityError(f"--by must be concurrency or rate, got {by!r}")
    load: By = "concurrency" if by == "concurrency" else "rate"
    return Grid(load, unit, start if start is not None else unit, limit)


def probe_base(workload: Workload, slo: SLO) -> Workload:
    """The workload every probe starts from, with the SLO's goodput bounds on each request."""
    return dataclasses.replace(workload, slo=slo.goodput())


def suggested_slo(workload: Workload | None) -> str:
    """The dialog's first text: the workload's goodput bounds as p99 bounds, else the default."""
    if workload is None or not workload.slo:
        return SUGGESTED_SLO
    return ",".join(f"p99_{key}_ms<={bound:g}" for key, bound in workload.slo.items())


def parse(text: str) -> SLO:
    """The SLO in vLLM's spelling (``p99_ttft_ms<=500,p99_itl_ms<=50``).

    Raises:
        SLOError: A TunelabError saying what is wrong and how to write it.
    """
    return parse_slo(text)


async def capacity(
    config: EngineConfig,
    workload: Workload,
    slo: SLO,
    runner: TrialRunner,
    *,
    study: str,
    launches: int = LAUNCHES,
    probes: int = PROBES,
    on_launch: Callable[[LaunchCapacity], None] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> CapacityReport:
    """The capacity of ``config`` at ``slo`` by concurrency, over ``launches`` launches.

    ``on_trial`` gets each probe trial as it ends (done, failed or skipped), as
    the A/B and sweep entry points give theirs, so a face lists them at once.
    """
    if on_trial is not None:
        runner = dataclasses.replace(runner, on_event=_recording(runner.on_event, on_trial))
    return await run_capacity(
        config,
        probe_base(workload, slo),
        slo,
        grid(),
        runner,
        launches=launches,
        probes=probes,
        study=study,
        on_launch=on_launch,
    )


async def search(
    base: EngineConfig,
    workload: Workload,
    space: Space,
    slo: SLO,
    runner: TrialRunner,
    *,
    n_trials: int,
    study: str,
    storage: str | None = None,
    seed: int | None = None,
) -> CapacitySearchReport:
    """Optuna over ``space`` maximising one launch's capacity at ``slo`` (``tune --objective capacity``)."""
    return await run_capacity_search(
        base,
        probe_base(workload, slo),
        space,
        slo,
        grid(),
        runner,
        n_trials=n_trials,
        study=study,
        storage=storage,
        probes=PROBES,
        seed=seed,
    )


def _recording(
    on_event: TrialEventCallback | None, on_trial: Callable[[Trial], None]
) -> TrialEventCallback:
    def call(event: TrialEvent) -> None:
        if on_event is not None:
            on_event(event)
        if isinstance(event, TrialDone | TrialFailed | TrialSkipped):
            on_trial(event.trial)

    return call


__all__ = [
    "LAUNCHES",
    "PROBES",
    "SLOError",
    "capacity",
    "grid",
    "parse",
    "search",
    "suggested_slo",
]
