"""Capacity as a search objective: Optuna looks for the config that carries the most load at an SLO.

``tunelab tune --objective capacity --slo 'p99_ttft_ms<=500' --param ...``:
each Optuna trial is one engine launch of the capacity search
(:func:`tuner.studies.capacity_run.run_launch`: doubling, then bisection over
probe trials) and its value is that launch's capacity, maximised. The study
lives in the same Optuna storage as ``tune``'s other objectives, named and
noted the same way (tuner.studies.optuna_labels), and refuses to be resumed
with another SLO or space. A point is one launch, so it carries no interval:
the report says to confirm the best with ``tunelab capacity --launches 3``
before trusting a small lead. The search runs its points one after the
other; parallel slots and interim pruning (which judge one measured run) do
not apply to a launch of probes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.redact import redact_url
from tuner.studies.capacity import UNIT, By, Grid, LaunchCapacity
from tuner.studies.capacity_run import DEFAULT_PROBES, run_launch
from tuner.studies.optuna_store import SearchError, default_storage
from tuner.studies.search import check_same_setup, load_study, recover_study, suggest
from tuner.studies.search_workers import Heartbeat, worker_owner
from tuner.studies.slo import SLO
from tuner.studies.space import WORKLOAD_KEYS, Space

if TYPE_CHECKING:
    # Deferred: the executor loads the engine and benchmark stack; not at a command's start.
    from tuner.studies.executor import TrialRunner

OBJECTIVE = "capacity"


@dataclass
class CapacityPoint:
    """One searched config: its knob values and the capacity its launch measured."""

    number: int
    values: dict[str, Any]
    launch: LaunchCapacity

    def to_dict(self) -> dict[str, Any]:
        return {"optuna_number": self.number, "values": self.values, **self.launch.to_dict()}


@dataclass
class CapacitySearchReport:
    """The search: every point, the best one, and what the figure rests on."""

    study: str
    storage: str
    slo: str
    by: By
    points: list[CapacityPoint] = field(default_factory=list)

    @property
    def measured(self) -> int:
        return sum(1 for p in self.points if p.launch.measured)

    @property
    def best(self) -> CapacityPoint | None:
        measured = [p for p in self.points if p.launch.measured]
        return max(measured, key=lambda p: p.launch.capacity) if measured else None

    def summary(self) -> str:
        best = self.best
        if best is None:
            return f"capacity search at {self.slo}: no point measured a capacity"
        knobs = " ".join(f"--set {k}={v}" for k, v in best.values.items())
        return (
            f"best of {self.measured} point(s): {best.values} carries {best.launch.capacity:g} "
            f"{UNIT[self.by]} at {self.slo} on one launch; confirm it "
            f"with an interval: tunelab capacity --slo '{self.slo}' --launches 3 {knobs}"
        )

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "study": self.study,
            "storage": self.storage,
            "objective": OBJECTIVE,
            "slo": self.slo,
            "by": self.by,
            "measured": self.measured,
            "summary": self.summary(),
            "best": best.to_dict() if best is not None else None,
            "points": [p.to_dict() for p in self.points],
        }


def check_space(space: Space, grid: Grid) -> None:
    """Refuse a space that also sets the load the capacity search varies.

    Raises:
        SearchError: No parameters, or one of them is the searched load.
    """
    if not space.params:
        raise SearchError("the search space is empty; give --space FILE or --param KEY=V1,V2")
    load = "concurrency" if grid.by == "concurrency" else "request_rate"
    clash = [p.key for p in space.params if p.key == load] + [k for k in space.fixed if k == load]
    if clash:
        raise SearchError(
            f"--objective capacity searches {load} itself; leave {load} out of the space"
        )


async def run_capacity_search(
    base: EngineConfig,
    workload: Workload,
    space: Space,
    slo: SLO,
    grid: Grid,
    runner: TrialRunner,
    *,
    n_trials: int,
    study: str = "tune-capacity",
    storage: str | None = None,
    probes: int = DEFAULT_PROBES,
    seed: int | None = None,
    on_point: Callable[[CapacityPoint], None] | None = None,
) -> CapacitySearchReport:
    """``n_trials`` Optuna points, each one capacity launch; resumes the study if it exists.

    Raises:
        SearchError: An empty space, a space that sets the load, n_trials < 1,
            or a stored study with another objective, SLO or space.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    check_space(space, grid)
    if n_trials < 1:
        raise SearchError(f"--trials must be >= 1, got {n_trials}")
    url = storage or default_storage()
    opt = load_study(study, url, [OBJECTIVE], seed=seed)
    config = base.with_values({k: v for k, v in space.fixed.items() if k not in WORKLOAD_KEYS})
    setup_space = Space(list(space.params), list(slo.constraints), dict(space.fixed))
    check_same_setup(opt, config, workload, setup_space)
    recover_study(opt, runner.store)
    owner = worker_owner()
    report = CapacitySearchReport(study, redact_url(url), str(slo), grid.by)
    for _ in range(n_trials):
        ot = opt.ask()
        ot.set_user_attr("owner", owner)
        values = {p.key: suggest(ot, p) for p in space.params}
        knobs = {k: v for k, v in values.items() if k not in WORKLOAD_KEYS}
        load = {k: v for k, v in {**space.fixed, **values}.items() if k in WORKLOAD_KEYS}
        try:
            with Heartbeat(opt._storage, ot._trial_id):
                answer = await run_launch(
                    config.with_values(knobs),
                    replace(workload, **load),
                    slo,
                    grid,
                    runner,
                    study=study,
                    launch=ot.number,
                    probes=probes,
                    arm=f"optuna#{ot.number}",
                )
        except BaseException:
            with contextlib.suppress(Exception):
                ot.set_user_attr("interrupted", True)
                opt.tell(ot, state=TrialState.FAIL)
            raise
        ot.set_user_attr("probe_trial_ids", [p.trial_id for p in answer.probes])
        ot.set_user_attr("capacity_launch", answer.to_dict())
        if answer.measured:
            opt.tell(ot, float(answer.capacity))
        else:
            ot.set_user_attr("failure_reason", (answer.failure or "no probe measured")[:500])
            opt.tell(ot, state=TrialState.FAIL)
        point = CapacityPoint(ot.number, values, answer)
        report.points.append(point)
        if on_point is not None:
            on_point(point)
    return report
