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

from tuner.bench.workload import (
    MAX_CONCURRENCY,
    MAX_NUM_PROMPTS,
    MIN_REQUEST_RATE,
    Workload,
    WorkloadError,
    check_count,
    check_rate,
)
from tuner.config import EngineConfig
from tuner.lab.limits import MAX_LAUNCHES, MAX_PROBES, MAX_TRIALS, StudyLimitError
from tuner.lab.limits import check_count as check_study_count
from tuner.studies.capacity import By, CapacityError, Grid
from tuner.studies.capacity_run import (
    DEFAULT_PROBES,
    PROMPTS_PER_USER,
    SECONDS_OF_ARRIVALS,
)
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


def check_plan(grid: Grid, *, launches: int = LAUNCHES, probes: int = PROBES) -> None:
    """Refuse counts and loads no probe could run, before any engine starts.

    The search raises the load from ``grid.start`` up to ``grid.limit``; a
    probe at concurrency N sends PROMPTS_PER_USER x N requests, one at rate R
    SECONDS_OF_ARRIVALS x R of them. Both ends must be loads a workload may
    have (tuner.bench.workload's bounds), or a search would fail minutes in.

    Raises:
        CapacityError: naming the option (``--launches``, ``--probes``, ``--max``,
            ``--start``) with its range.
    """
    try:
        check_study_count("--launches", launches, 1, MAX_LAUNCHES)
        check_study_count("--probes", probes, 2, MAX_PROBES)
    except StudyLimitError as exc:
        raise CapacityError(exc.message, fix=exc.fix) from None
    try:
        if grid.by == "concurrency":
            most = min(MAX_CONCURRENCY, MAX_NUM_PROMPTS // PROMPTS_PER_USER)
            check_count("--max", int(grid.limit), 1, most, "users")
            return
        check_rate("--max", grid.limit)
        most_rate = MAX_NUM_PROMPTS / SECONDS_OF_ARRIVALS
        if grid.limit > most_rate:
            raise WorkloadError(
                f"--max must be at most {most_rate:g} requests/s for a capacity search "
                f"({SECONDS_OF_ARRIVALS:g} s of arrivals per probe), got {grid.limit:g}"
            )
    except WorkloadError as exc:
        raise CapacityError(exc.message, fix="lower the largest load (--max)") from None
    try:
        check_rate("the first load (--start, else --step)", grid.start)
    except WorkloadError as exc:
        raise CapacityError(
            exc.message, fix=f"give --start and --step of at least {MIN_REQUEST_RATE:g} requests/s"
        ) from None


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
    try:
        check_study_count("trials", n_trials, 1, MAX_TRIALS)
    except StudyLimitError as exc:
        raise CapacityError(exc.message, fix=exc.fix) from None
    check_plan(grid())
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


def recording(
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
    "check_plan",
    "grid",
    "parse",
    "recording",
    "search",
    "suggested_slo",
]
