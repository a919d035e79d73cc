"""Running a capacity search: every probe of a launch on ONE engine, through the trial runner.

Each probe is a stored trial of the study (config, workload at that load,
results, timings), measured by the one trial runner
(:meth:`tuner.studies.executor.TrialRunner.many` → ``run_workloads``): rules
checked once, one engine start, crash watch, every state committed. The search
is adaptive (the next load depends on the last result) while ``run_workloads``
takes its trials up front, so a launch hands it a fixed budget of probe
trials and plans each one's load when the one before it ends: the runner
measures its trials in order and reports each as done or failed before it
starts the next, so the load is set (and stored) before that probe's
benchmark reads it. After the boundary is found, the remaining probes
re-measure its two sides (see :mod:`tuner.studies.capacity`).

A probe whose planned load did not reach the benchmark would be a silent
error, so :func:`run_launch` checks every probe afterwards and raises if one
was measured at another load than planned.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tuner.studies.ab import schedule
from tuner.studies.capacity import (
    Bracket,
    CapacityAB,
    CapacityError,
    CapacityReport,
    Grid,
    LaunchCapacity,
    Probe,
    launch_result,
)
from tuner.studies.capacity_model import GuidedSearch
from tuner.studies.common import study_name, value_of
from tuner.studies.slo import SLO
from tuner.trials.events import TrialDone, TrialEvent, TrialFailed, TrialStage
from tuner.trials.model import PROBE_KIND, WORKLOAD_REFUSED, Trial

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.executor import TrialRunner
    from tuner.trials.store import TrialStore

# Requests per probe: at least this many per concurrent user, or this many
# seconds of arrivals at a request rate, so a percentile is not one request.
PROMPTS_PER_USER = 4
SECONDS_OF_ARRIVALS = 10.0
DEFAULT_PROBES = 10


def probe_workload(base: Workload, grid: Grid, value: float) -> Workload:
    """The base workload at one load, with enough requests for the load to build up."""
    if grid.by == "concurrency":
        users = int(value)
        return replace(
            base, concurrency=users, num_prompts=max(base.num_prompts, PROMPTS_PER_USER * users)
        )
    count = max(base.num_prompts, math.ceil(SECONDS_OF_ARRIVALS * value))
    return replace(base, request_rate=value, num_prompts=count)


def slo_values(trial: Trial, slo: SLO) -> dict[str, float] | None:
    """The SLO keys' values of a finished probe (None: the probe failed or lacks a key)."""
    values = {key: value_of(trial, key) for key in slo.keys}
    if any(v is None for v in values.values()):
        return None
    return {k: float(v) for k, v in values.items() if v is not None}


class _Planner:
    """Sets each probe's load when the probe before it ends (see the module docstring)."""

    def __init__(
        self, probes: list[Trial], bracket: Bracket, base: Workload, model: bool = True
    ) -> None:
        self.probes = probes
        self.position = {t.id: i for i, t in enumerate(probes)}
        self.bracket = bracket
        self.base = base
        # Where the study model may place probes, and the verdict it expected of each one
        # it placed (tuner.studies.capacity_model.GuidedSearch).
        self.search = GuidedSearch(bracket, model)
        self.expected: dict[str, bool] = {}
        self.planned: dict[str, float] = {}
        self.started: set[str] = set()
        self.ended: set[str] = set()
        self.error: BaseException | None = None

    def plan(self, index: int) -> None:
        grid = self.bracket.grid
        units, expected = self.search.next(lambda v: probe_workload(self.base, grid, v))
        value = grid.value(units)
        trial = self.probes[index]
        trial.workload = probe_workload(self.base, grid, value)
        trial.tags = {**trial.tags, "value": value}
        if expected is not None:
            trial.tags["planned_by"] = "model"
            self.expected[trial.id] = expected
        self.planned[trial.id] = value

    def on_event(self, event: TrialEvent) -> None:
        try:
            self._on_event(event)
        except Exception as exc:  # the runner swallows watchers' errors; keep it for the caller
            self.error = exc

    def _on_event(self, event: TrialEvent) -> None:
        if isinstance(event, TrialStage) and event.stage in ("warmup", "measuring"):
            self.started.add(event.trial_id)
            return
        if not isinstance(event, TrialDone | TrialFailed):
            return
        trial = event.trial
        if trial.id not in self.planned or trial.id in self.ended:
            return
        self.ended.add(trial.id)
        if trial.id not in self.started:
            return  # never measured: the engine did not start, or crashed on an earlier probe
        if (trial.failure_reason or "").startswith(WORKLOAD_REFUSED):
            # Not a miss at this load: no load of this workload can run (the runner failed
            # the launch's other probes unrun); the answer is the reason, not "capacity 0".
            self.error = CapacityError(
                trial.failure_reason or WORKLOAD_REFUSED,
                fix="fix the workload (its dataset, tokenizer or preset [workload]) and rerun",
            )
            return
        # A failed probe (too many failed requests, an engine crash at this load) misses.
        values = slo_values(trial, self.bracket.slo)
        units = self.bracket.grid.units(self.planned[trial.id])
        self.search.record(units, values, trial, self.expected.get(trial.id))
        index = self.position[trial.id] + 1
        if index < len(self.probes) and not self.probes[index].status.final:
            self.plan(index)


def _chain(*callbacks: Callable[[TrialEvent], None] | None) -> Callable[[TrialEvent], None]:
    def call(event: TrialEvent) -> None:
        for callback in callbacks:
            if callback is not None:
                callback(event)

    return call


async def run_launch(
    config: EngineConfig,
    base: Workload,
    slo: SLO,
    grid: Grid,
    runner: TrialRunner,
    *,
    study: str,
    launch: int,
    probes: int = DEFAULT_PROBES,
    arm: str | None = None,
    model: bool = True,
) -> LaunchCapacity:
    """One engine launch: the doubling-then-bisection search over ``probes`` probe trials;
    ``model``: let the study model place probes at its boundary guess once three are
    measured (tuner.studies.capacity_model; False: never).

    Raises:
        CapacityError: A probe was measured at a load other than planned (a
            change in the runner broke the planning contract).
    """
    bracket = Bracket(grid, slo)
    tags: dict[str, Any] = {
        "kind": PROBE_KIND,
        "by": grid.by,
        "slo": str(slo),
        "launch": launch,
        # The grid, so a stored launch is judged again exactly (tuner.studies.capacity_steps).
        "step": grid.step,
        "limit": grid.limit,
    }
    trials = [
        Trial(
            config=config,
            workload=base,
            study=study,
            objective=slo.keys[0],
            arm=arm,
            repeat=launch,
            tags={**tags, "probe": i},
        )
        for i in range(probes)
    ]
    planner = _Planner(trials, bracket, base, model)
    planner.plan(0)
    # The drift guard checks outputs, not load: it would add seconds to every probe.
    probing = replace(
        runner,
        on_event=_chain(planner.on_event, runner.on_event),
        options={**runner.options, "guard": False},
    )
    try:
        await probing.many(trials)
    except BaseException:
        # Stopped (Ctrl-C, the TUI's s): a probe the engine never measured is no trial of
        # the study; the launch's measured probes stay, and capacity_steps reads them back.
        _forget_unmeasured(runner.store, trials, planner)
        raise
    if planner.error is not None:
        raise planner.error
    return _launch_answer(launch, trials, planner, bracket)


def _forget_unmeasured(store: TrialStore, trials: list[Trial], planner: _Planner) -> None:
    """Delete the probes a stopped launch never measured (no benchmark ran for them)."""
    for trial in trials:
        if trial.id in planner.started or "bench_s" in trial.timings:
            continue
        with contextlib.suppress(Exception):  # a stop must not fail on clean-up
            store.delete(trial.id)


def _launch_answer(
    launch: int, trials: list[Trial], planner: _Planner, bracket: Bracket
) -> LaunchCapacity:
    """The launch's capacity from its probes, after checking each ran at its planned load."""
    measured: list[Probe] = []
    for trial in trials:
        if trial.id not in planner.planned or trial.id not in planner.started:
            continue
        value = planner.planned[trial.id]
        wanted = probe_workload(planner.base, bracket.grid, value)
        if trial.workload != wanted:
            raise CapacityError(
                f"probe {trial.short_id} ran {trial.workload} instead of the planned load {value}",
                exit_code=1,
            )
        values = slo_values(trial, bracket.slo)
        measured.append(
            Probe(
                value=value,
                met=values is not None and bracket.slo.met(values),
                trial_id=trial.id,
                margin=bracket.slo.margin(values) if values is not None else None,
                values=values or {},
                by_model=trial.tags.get("planned_by") == "model",
            )
        )
    if not bracket.runs:
        reasons = {t.failure_reason or str(t.status) for t in trials}
        return LaunchCapacity(
            launch, 0.0, None, False, failure="; ".join(sorted(reasons)), probes=measured
        )
    return replace(
        launch_result(launch, bracket, measured), to_converge=planner.search.converged_at
    )


async def run_capacity(
    config: EngineConfig,
    base: Workload,
    slo: SLO,
    grid: Grid,
    runner: TrialRunner,
    *,
    launches: int = 3,
    probes: int = DEFAULT_PROBES,
    study: str | None = None,
    confidence: float = 0.95,
    on_launch: Callable[[LaunchCapacity], None] | None = None,
    model: bool = True,
) -> CapacityReport:
    """Capacity of ``config`` at ``slo``: the search repeated on ``launches`` engine launches.

    Args:
        config: The engine config.
        base: The workload every probe starts from (its load field is set per probe).
        slo: What every probe must meet.
        grid: The load variable, its resolution, first load and limit.
        runner: The study's trial runner (store, events, run options).
        launches: Engine launches (>= 2 for an interval).
        probes: Measured runs per launch (the search and then the boundary's re-runs).
        study: Study name (default ``capacity-<time>``).
        confidence: Level of the interval over launches.
        on_launch: Called with each launch's answer as it is known.
        model: Let the study model place probes at its boundary guess
            (tuner.studies.capacity_model; ``--no-model``: never).

    Raises:
        CapacityError: Fewer than 1 launch, or fewer probes than one doubling and one bisection.
    """
    check_counts(launches, probes)
    name = study or study_name("capacity")
    answers: list[LaunchCapacity] = []
    for launch in range(launches):
        answer = await run_launch(
            config, base, slo, grid, runner, study=name, launch=launch, probes=probes,
            model=model,
        )  # fmt: skip
        answers.append(answer)
        if on_launch is not None:
            on_launch(answer)
    return CapacityReport(name, grid.by, str(slo), grid, answers, confidence)


def check_counts(launches: int, probes: int) -> None:
    if launches < 1:
        raise CapacityError(f"launches must be >= 1 (3 or more for an interval), got {launches}")
    if probes < 2:
        raise CapacityError(f"probes must be >= 2 per launch, got {probes}", fix="use --probes 10")


async def run_capacity_ab(
    a: EngineConfig,
    b: EngineConfig,
    base: Workload,
    slo: SLO,
    grid: Grid,
    runner: TrialRunner,
    *,
    launches: int = 3,
    probes: int = DEFAULT_PROBES,
    study: str | None = None,
    confidence: float = 0.95,
    on_launch: Callable[[str, LaunchCapacity], None] | None = None,
    model: bool = True,
) -> CapacityAB:
    """Capacity as an A/B objective: both configs searched on ``launches`` launches each.

    Launches alternate A B B A ... (tuner.studies.ab.schedule), so slow drift of
    the machine hits both arms alike; the capacities per launch are compared
    with Welch's interval on B/A, as any A/B metric.

    Raises:
        CapacityError: Bad counts, or arms on different models.
    """
    check_counts(launches, probes)
    if a.model != b.model:
        raise CapacityError(
            f"arms A and B serve different models ({a.model} vs {b.model})",
            fix="compare knobs on one model",
        )
    name = study or study_name("capacity-ab")
    answers: dict[str, list[LaunchCapacity]] = {"A": [], "B": []}
    for arm, launch in schedule(launches, "abba"):
        answer = await run_launch(
            a if arm == "A" else b,
            base,
            slo,
            grid,
            runner,
            study=name,
            launch=launch,
            probes=probes,
            arm=arm,
            model=model,
        )
        answers[arm].append(answer)
        if on_launch is not None:
            on_launch(arm, answer)
    reports = {
        arm: CapacityReport(name, grid.by, str(slo), grid, found, confidence)
        for arm, found in answers.items()
    }
    return CapacityAB(reports["A"], reports["B"])
