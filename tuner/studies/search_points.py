"""How one search asks, skips or measures, and tells a point: the ask/tell half of a search.

:mod:`tuner.studies.search` owns a study (its storage, setup, recovery, budget and report);
this module owns one point of it: the Optuna ask (the study model's proposal enqueued first,
:mod:`tuner.studies.search_propose`), the tunelab trial it becomes, the skip check
(:mod:`tuner.studies.search_skip`), the measurement with its interim reports to the pruner,
and the one teller of every outcome to Optuna (:func:`tell_outcome`, also used to recover
a dead worker's committed trial).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tuner.redact import redact_url
from tuner.rules import blocking
from tuner.studies.common import meets, value_of
from tuner.studies.pruning import ReadingLog, is_pruned
from tuner.studies.search_propose import PROPOSE_TAG, Proposal, values_key
from tuner.studies.search_skip import (
    SKIP_TAG,
    SkipVerdict,
    is_model_skip,
    record_skip,
    tell_skip,
)
from tuner.studies.search_workers import Heartbeat
from tuner.studies.space import WORKLOAD_KEYS, Constraint, Param, Space
from tuner.trials.events import TrialSkipped
from tuner.trials.model import Trial, TrialStatus

if TYPE_CHECKING:
    from collections.abc import Iterable

    import optuna
    from optuna.trial import TrialState

    from tuner.bench.progress import BenchProgress
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.executor import TrialRunner


def tell_outcome(
    opt: optuna.Study,
    ot: optuna.Trial,
    done: Trial,
    objectives: list[str],
    constraints: Iterable[Constraint],
) -> TrialState:
    """Tells Optuna what a finished tunelab trial measured; returns the state told.

    Used for a trial that just ran and for one recovered after its worker was
    killed while the result was already committed in the trial store.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    constraints = list(constraints)
    if is_pruned(done):
        # Stopped early, dominated: Optuna's own PRUNED (its last reported rate ranks it).
        ot.set_user_attr("pruned_reason", (done.failure_reason or "pruned")[:500])
        ot.set_user_attr("stopped_early", True)
        opt.tell(ot, state=TrialState.PRUNED)
        return TrialState.PRUNED
    if is_model_skip(done):  # not launched: told as the search told it (a recovered one too)
        verdict = SkipVerdict.from_dict(done.tags[SKIP_TAG])
        return tell_skip(opt, ot, verdict, objectives, constraints)
    if done.status is TrialStatus.SKIPPED:
        errors = [f.message for f in blocking(done.findings)]
        ot.set_user_attr("pruned_reason", "; ".join(errors)[:500] or "rules")
        opt.tell(ot, state=TrialState.PRUNED)
        return TrialState.PRUNED
    results = [value_of(done, m) for m in objectives]
    if done.status is TrialStatus.DONE and all(v is not None for v in results):
        violations = [c.violation(value_of(done, c.metric)) for c in constraints]
        for c, v in zip(constraints, violations, strict=True):
            ot.set_constraint(str(c), v)
        ot.set_user_attr("constraints", violations)
        ot.set_user_attr("meets_slo", meets(done, constraints))
        ot.set_user_attr(
            "metrics",
            {m: value_of(done, m) for m in {*objectives, *(c.metric for c in constraints)}},
        )
        opt.tell(ot, [float(v) for v in results if v is not None])
        return TrialState.COMPLETE
    ot.set_user_attr("failure_reason", (done.failure_reason or str(done.status))[:500])
    opt.tell(ot, state=TrialState.FAIL)
    return TrialState.FAIL


def suggest(trial: optuna.Trial, param: Param) -> Any:
    """Optuna's suggestion for one parameter."""
    if param.kind == "categorical":
        return trial.suggest_categorical(param.key, list(param.choices))
    if param.kind == "int":
        return trial.suggest_int(
            param.key, int(param.low or 0), int(param.high or 0), log=param.log
        )
    return trial.suggest_float(
        param.key, float(param.low or 0), float(param.high or 0), log=param.log
    )


@dataclass
class SearchPoints:
    """What every point of one search is built from (the study, its setup and its space),
    and the study model's proposals: the check, the points in flight, one ask at a time."""

    opt: Any
    base: EngineConfig
    workload: Workload
    space: Space
    study: str
    url: str
    owner: dict[str, Any]
    objectives: list[str]
    propose: Callable[[set[str]], Proposal | None] | None = None
    in_flight: set[str] = field(default_factory=set)
    asking: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ask(self) -> tuple[optuna.Trial, Trial]:
        """Optuna's next point — the model's proposal first when it has one — and its trial."""
        async with self.asking:
            if self.propose is not None:
                proposal = await asyncio.to_thread(self.propose, set(self.in_flight))
                if proposal is not None:
                    self.opt.enqueue_trial(
                        proposal.values, user_attrs={PROPOSE_TAG: proposal.to_dict()}
                    )
            ot = self.opt.ask()
            trial = self.trial(ot)
            self.in_flight.add(values_key(trial.tags["values"]))
        return ot, trial

    def trial(self, ot: optuna.Trial) -> Trial:
        """The tunelab trial of Optuna's next suggestion."""
        ot.set_user_attr("owner", self.owner)
        values = {p.key: suggest(ot, p) for p in self.space.params}
        trial = self.trial_of(values)
        ot.set_user_attr("tunelab_trial_id", trial.id)
        trial.tags["optuna_number"] = ot.number
        proposed = ot.user_attrs.get(PROPOSE_TAG)
        if isinstance(proposed, dict) and values_key(proposed.get("values") or {}) == values_key(
            values
        ):
            trial.tags[PROPOSE_TAG] = proposed
        return trial

    def trial_of(self, values: dict[str, Any]) -> Trial:
        """The tunelab trial of one point of the space (values by the space's keys)."""
        knobs = {k: v for k, v in values.items() if k not in WORKLOAD_KEYS}
        fixed = {**self.space.fixed, **values}
        load = {k: v for k, v in fixed.items() if k in WORKLOAD_KEYS}
        trial = Trial(
            config=self.base.with_values(knobs),
            workload=replace(self.workload, **load),
            study=self.study,
            objective=self.objectives[0],
            tags={
                "kind": "search",
                "values": values,
                "storage": redact_url(self.url),  # stored in every trial: never the password
                "slo": [str(c) for c in self.space.constraints],
            },
        )
        return trial


async def measure_one(
    point: SearchPoints,
    runner: TrialRunner,
    pruner: Any = None,
    sure_miss: Callable[[Trial], SkipVerdict | None] | None = None,
) -> tuple[Trial, Any]:
    """Ask one point, measure it on a free slot, tell the outcome: (trial, Optuna state).

    With a ``pruner`` the point's interim rates are reported to Optuna as it
    runs, and the point is stopped when ``should_prune`` says so. A point
    ``sure_miss`` judges sure to miss the SLO is stored as skipped and told
    as the model's miss without a launch.
    """
    ot, trial = await point.ask()
    try:
        return await _settle(point, runner, ot, trial, pruner, sure_miss)
    finally:
        point.in_flight.discard(values_key(trial.tags["values"]))


async def _settle(
    point: SearchPoints,
    runner: TrialRunner,
    ot: optuna.Trial,
    trial: Trial,
    pruner: Any,
    sure_miss: Callable[[Trial], SkipVerdict | None] | None,
) -> tuple[Trial, Any]:
    """Skip the asked point when the model is sure it misses, else measure it; tell Optuna."""
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    opt = point.opt
    verdict = await asyncio.to_thread(sure_miss, trial) if sure_miss is not None else None
    if verdict is not None:
        record_skip(runner.store, trial, verdict)
        runner.announce(TrialSkipped(trial, (), trial.failure_reason or verdict.reason()))
        return trial, tell_outcome(opt, ot, trial, point.objectives, point.space.constraints)
    try:
        with Heartbeat(opt._storage, ot._trial_id):
            watch = _reporter(ot, pruner) if pruner is not None else None
            done = await runner.one(trial, watch=watch)
    except BaseException:
        # Ctrl-C or a bug: the point was not measured; say so in the study at once.
        with contextlib.suppress(Exception):
            ot.set_user_attr("interrupted", True)
            opt.tell(ot, state=TrialState.FAIL)
        raise
    return done, tell_outcome(opt, ot, done, point.objectives, point.space.constraints)


def _reporter(ot: optuna.Trial, pruner: Any) -> Callable[[Trial, BenchProgress], Any]:
    """The watch of one point: report each reading to Optuna, stop when it should be pruned."""
    log = ReadingLog()

    def watch(trial: Trial, progress: BenchProgress) -> Any:
        if not log.add(progress):
            return None
        step, rate = log.readings[-1]
        ot.report(rate, step)
        if not ot.should_prune():
            return None
        return pruner.decisions.get(ot.number)

    return watch
