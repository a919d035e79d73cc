"""Sweeps: vary one knob with the rest fixed, or descend over several knobs in turn.

The reference guides tune one knob at a time on a fixed workload
(000_cadfc2653427814e.txt §Throughput benchmarking, "Profiling checklist":
"Fix your prompt distribution (ISL/OSL) and vary one knob at a time ...
Sweep --max-num-batched-tokens"); a sweep does exactly that and records
every point as a trial of one study. Coordinate descent repeats it knob by knob, keeping the
best value of each (among points that meet the SLO) before moving on; points
already measured are reused, not re-run. A value the rules reject becomes a
skipped trial without an engine start (the trial runner checks the rules).
When only workload fields vary (concurrency, request rate, lengths) one
engine serves every point, since restarting an identical server would only
add a minute of start-up per point and noise nobody asked about.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tuner.errors import TunelabError
from tuner.studies.common import meets, study_name, value_of
from tuner.studies.pruning import PruneMonitor, is_pruned, prunable
from tuner.studies.space import WORKLOAD_KEYS, Constraint, Param
from tuner.studies.stats import Direction, metric_direction
from tuner.trials.model import Trial

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.executor import TrialRunner


class SweepError(TunelabError, ValueError):
    """A sweep that cannot run as declared; says what to change."""


@dataclass
class SweepPoint:
    """One value of the swept knob (with the other knobs at their current values).

    Attributes:
        knob: The knob varied in this step.
        value: Its value at this point.
        values: Every varied value in effect (earlier knobs at their best).
        trials: The point's trials (several with repeats).
        met_slo: Whether every finished repeat met the SLO (False when none finished).
    """

    knob: str
    value: Any
    values: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)
    met_slo: bool = False

    def objective(self, key: str) -> float | None:
        """Mean objective over the finished repeats (None when none finished)."""
        samples = [v for t in self.trials if (v := value_of(t, key)) is not None]
        return statistics.fmean(samples) if samples else None

    def to_dict(self, key: str) -> dict[str, Any]:
        return {
            "knob": self.knob,
            "value": self.value,
            "values": self.values,
            "objective": self.objective(key),
            "met_slo": self.met_slo,
            "trials": [t.id for t in self.trials],
            "statuses": [str(t.status) for t in self.trials],
            "pruned": [t.id for t in self.trials if is_pruned(t)],
        }


@dataclass
class SweepStep:
    """One knob's sweep: its points and the value kept."""

    knob: str
    points: list[SweepPoint]
    best: Any = None
    note: str = ""


@dataclass
class SweepReport:
    """A finished sweep or descent."""

    study: str
    objective: str
    steps: list[SweepStep]
    best_values: dict[str, Any]
    best_trial: str | None
    constraints: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "objective": self.objective,
            "constraints": self.constraints,
            "best_values": self.best_values,
            "best_trial": self.best_trial,
            "steps": [
                {
                    "knob": s.knob,
                    "best": s.best,
                    "note": s.note,
                    "points": [p.to_dict(self.objective) for p in s.points],
                }
                for s in self.steps
            ],
        }


def _apply(
    config: EngineConfig, workload: Workload, values: dict[str, Any]
) -> tuple[EngineConfig, Workload]:

    knobs = {k: v for k, v in values.items() if k not in WORKLOAD_KEYS}
    load = {k: v for k, v in values.items() if k in WORKLOAD_KEYS}
    return config.with_values(knobs), replace(workload, **load)


def _identity(config: EngineConfig, workload: Workload) -> str:

    return config.config_id + json.dumps(workload.to_dict(), sort_keys=True)


def _better(a: float, b: float, direction: Direction) -> bool:
    return a > b if direction is Direction.HIGHER else a < b


def _plan_points(
    param: Param,
    current: dict[str, Any],
    base: EngineConfig,
    workload: Workload,
    measured: dict[str, SweepPoint],
) -> tuple[list[SweepPoint], list[SweepPoint]]:
    """The step's points (in value order) and the fresh ones among them (not measured before)."""
    points: list[SweepPoint] = []
    fresh: list[SweepPoint] = []
    for value in param.values():
        at = {**current, param.key: value}
        # Identity is what really runs (config + workload), so a point that a
        # later step reaches again (e.g. the base's own concurrency) is reused.
        key = _identity(*_apply(base, workload, at))
        if key in measured:
            seen = measured[key]
            alias = SweepPoint(param.key, value, at, seen.trials, seen.met_slo)
            measured[key] = alias  # the latest, most specific description
            points.append(alias)
            continue
        point = SweepPoint(param.key, value, at)
        measured[key] = point
        points.append(point)
        fresh.append(point)
    return points, fresh


def _batch(
    fresh: Sequence[SweepPoint],
    param: Param,
    base: EngineConfig,
    workload: Workload,
    plan: _Plan,
) -> list[tuple[SweepPoint, Trial]]:
    """The step's trials, repeats interleaved across points (rep 0 of every point first)."""
    batch: list[tuple[SweepPoint, Trial]] = []
    for rep in range(plan.repeats):
        for point in fresh:
            config, load = _apply(base, workload, point.values)
            trial = Trial(
                config=config,
                workload=load,
                study=plan.study,
                objective=plan.objective,
                repeat=rep,
                tags={
                    "kind": "sweep",
                    "knob": param.key,
                    "value": point.value,
                    "values": point.values,
                    "slo": [str(c) for c in plan.constraints],
                },
            )
            batch.append((point, trial))
    return batch


async def _measure(
    batch: list[tuple[SweepPoint, Trial]], param: Param, runner: TrialRunner, plan: _Plan
) -> None:
    """Run the step's trials and attach them to their points.

    Workload-only steps share one engine; knob steps run side by side on the
    GPU slots, and a point clearly dominated a short window into its run is
    stopped (:mod:`tuner.studies.pruning`) when ``plan.prune`` allows it.
    """
    if param.is_workload:
        finished = await runner.many([t for _, t in batch])
        for (point, _), trial in zip(batch, finished, strict=True):
            point.trials.append(trial)
            if plan.on_trial is not None:
                plan.on_trial(trial)
        return
    monitor = None
    if plan.prune and prunable(plan.objective):
        # With an SLO a running peer may still miss it: only finished, SLO-meeting peers count.
        monitor = PruneMonitor(peers_running=not plan.constraints)
        for point, trial in batch:
            monitor.enrol(trial, str(id(point)))  # repeats of a point share it

    def on_done(trial: Trial) -> None:
        if monitor is not None:
            monitor.finished(trial, meets(trial, plan.constraints))
        if plan.on_trial is not None:
            plan.on_trial(trial)

    watch = monitor.observe if monitor is not None else None
    finished = await runner.all([t for _, t in batch], on_done=on_done, watch=watch)
    for (point, _), done in zip(batch, finished, strict=True):
        point.trials.append(done)


def _best_of(
    points: Iterable[SweepPoint], objective: str, direction: Direction
) -> SweepPoint | None:
    """The point with the best objective among those that met the SLO (first on ties)."""
    best: SweepPoint | None = None
    best_score: float | None = None
    for point in points:
        score = point.objective(objective)
        if not point.met_slo or score is None:
            continue
        if best is None or best_score is None or _better(score, best_score, direction):
            best, best_score = point, score
    return best


@dataclass(frozen=True)
class _Plan:
    """What every step of one sweep shares."""

    study: str
    objective: str
    repeats: int
    constraints: Sequence[Constraint]
    prune: bool
    on_trial: Callable[[Trial], None] | None


async def run_sweep(
    base: EngineConfig,
    workload: Workload,
    params: Sequence[Param],
    runner: TrialRunner,
    *,
    repeats: int = 1,
    constraints: Sequence[Constraint] = (),
    objective: str = "output_throughput",
    study: str | None = None,
    on_trial: Callable[[Trial], None] | None = None,
    prune: bool = True,
) -> SweepReport:
    """Sweep ``params[0]``; with more params, coordinate descent over them in order.

    Args:
        base: The config every point starts from.
        workload: The workload every point starts from.
        params: Knobs (or workload fields) with their values; descent order.
        runner: Runs the trials (store, events and run options).
        repeats: Trials per point, interleaved across points.
        constraints: SLO bounds a point must meet to be kept as best.
        objective: The result key that picks the best value.
        study: Study name (default ``sweep-<time>``).
        on_trial: Called with each trial once final.
        prune: Stop a knob point whose interim throughput is clearly below
            another point of the same step (throughput objectives only; a
            pruned point is never kept as best).

    Raises:
        SweepError: No params, repeats < 1, or a param without listed values.
    """
    if not params:
        raise SweepError("nothing to sweep: give at least one KEY=V1,V2,...")
    if repeats < 1:
        raise SweepError(f"repeats must be >= 1, got {repeats}")
    plan = _Plan(
        study or study_name("sweep"), objective, repeats, tuple(constraints), prune, on_trial
    )
    direction = metric_direction(objective)
    current: dict[str, Any] = {}
    measured: dict[str, SweepPoint] = {}
    steps: list[SweepStep] = []
    planned = [len(p.values()) * repeats for p in params]
    progress = runner.begin(plan.study, "sweep", sum(planned))
    for index, param in enumerate(params):
        points, fresh = _plan_points(param, current, base, workload, measured)
        batch = _batch(fresh, param, base, workload, plan)
        progress.extend(len(batch) - planned[index])  # points measured before are reused
        progress.say(f"knob {index + 1}/{len(params)}: {param.key}")
        if batch:
            await _measure(batch, param, runner, plan)
        for point in fresh:
            point.met_slo = bool(point.trials) and all(meets(t, constraints) for t in point.trials)
        step = SweepStep(param.key, points)
        best = _best_of(points, objective, direction)
        if best is None:
            step.note = f"no value of {param.key} finished within the SLO; kept it unset"
        else:
            step.best = best.value
            current[param.key] = best.value
        steps.append(step)
    best_point = _best_of(measured.values(), objective, direction)
    best_trial = None
    if best_point is not None:
        finished = [t for t in best_point.trials if value_of(t, objective) is not None]
        best_trial = finished[0].id if finished else None
    return SweepReport(
        study=plan.study,
        objective=objective,
        steps=steps,
        best_values=dict(best_point.values) if best_point else {},
        best_trial=best_trial,
        constraints=[str(c) for c in constraints],
    )
