"""Points a search need not launch: the ones the study model is sure miss the SLO.

A launch costs minutes on a GPU node, and a search under an SLO spends many on points that
break it (a high concurrency on a small batch, a long prefill chunk under a tight TTFT
bound). Once :data:`SKIP_MIN_TRIALS` trials of the candidate's own context are measured
(:mod:`tuner.perfmodel.observation`: same model, env, platform, release, other engine
arguments and workload shape), the step costs they imply predict each SLO key of the
candidate: output throughput from the wave arithmetic, every TTFT/ITL/TPOT/E2E percentile
from the request-by-request replay (:mod:`tuner.perfmodel.simulate`).

"Sure" is measured, never assumed: each measured trial of the group is predicted by a model
fitted on the others (leave one out), for the very SLO key, and the sure interval is
:data:`SURE_FACTOR` times the largest such error (never under :data:`SURE_FLOOR`), on a log
scale so that it stays positive. The errors are taken with a tenth of the bound added to both
sides (:data:`FLOOR_OF_BOUND`): a 2 ms TTFT predicted as 0.5 ms under a 500 ms bound says
nothing about the verdicts near the bound, where a few milliseconds of client overhead
would otherwise make every small value look 4x off. A point is skipped only when its whole sure interval misses
a bound; a model that was off on a measured point widens its interval by that much for every
later point, so a poor model skips nothing. A skipped point is stored as a trial (status
``skipped``, :data:`SKIP_TAG` holding the verdict, no engine started) and told to Optuna as
a miss, with the model's values and SLO violations in place of measured ones (marked as the
model's), so the sampler learns the infeasible region as it would from a run; ``tunelab tune
--no-skip`` measures every point.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.studies.common import value_of
from tuner.studies.space import Constraint
from tuner.trials.model import Trial, TrialStatus

if TYPE_CHECKING:
    from optuna.trial import TrialState

    from tuner.trials.store import TrialStore

__all__ = [
    "SKIP_MIN_TRIALS",
    "SKIP_TAG",
    "SURE_FACTOR",
    "SURE_FLOOR",
    "SkipVerdict",
    "describe_skip",
    "is_model_skip",
    "predict_key",
    "record_skip",
    "skipper",
    "sure_miss",
    "tell_skip",
]

SKIP_TAG = "model_skip"
SKIP_MIN_TRIALS = 4  # three step costs to fit, and at least one trial to check them on
SURE_FACTOR = 1.5  # the sure interval: 1.5 x the largest leave-one-out error of the key
SURE_FLOOR = math.log(1.25)  # never surer than +-25 %
FLOOR_OF_BOUND = 0.1  # an error on values this far under the bound cannot flip a verdict


@dataclass(frozen=True)
class SkipVerdict:
    """Why a point is not launched: the SLO bound its whole sure interval misses.

    Attributes:
        constraint: The bound it misses (``p99_ttft_ms<=500``).
        predicted: The model's value of the bound's key at the point.
        low: The sure interval's low end.
        high: Its high end.
        trials: The measured trials the model and its interval stand on.
        values: The model's value of every key it was asked for and can tell (the
            search's objectives and SLO keys): what the sampler is told in place of a run.
    """

    constraint: str
    predicted: float
    low: float
    high: float
    trials: int
    values: dict[str, float] = dataclasses.field(default_factory=dict)

    def reason(self) -> str:
        """``the study model predicts p99_ttft_ms ~1,240 (sure between 950 and 1,610, from 6
        measured trials): misses p99_ttft_ms<=500``."""
        key = self.constraint.split("<")[0].split(">")[0]
        return (
            f"the study model predicts {key} ~{_num(self.predicted)} (sure between "
            f"{_num(self.low)} and {_num(self.high)}, from {self.trials} measured trials): "
            f"misses {self.constraint}"
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SkipVerdict:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def describe_skip(entry: Mapping[str, Any]) -> str:
    """One skipped point of a search report (``values`` and the verdict's fields), as every
    face prints it."""
    values = " ".join(f"{k}={v}" for k, v in (entry.get("values") or {}).items())
    return f"skipped {values or 'a point'}: {SkipVerdict.from_dict(entry).reason()}"


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def sure_miss(
    trials: Sequence[Any],
    candidate: Any,
    constraints: Sequence[Constraint],
    keys: Sequence[str] = (),
) -> SkipVerdict | None:
    """The first bound ``candidate`` is sure to miss, by the model of ``trials`` (its study's
    trials) of its own context; None when none is sure or the model cannot say. The verdict
    carries the model's value of ``keys`` and of every bound's key where it can tell them."""
    from tuner.perfmodel.observation import context_text, observation_of_trial, trial_parts

    mine = trial_parts(candidate)
    if mine is None or not constraints:
        return None
    point, parts = mine
    context = context_text(parts)
    group = [
        (obs, trial)
        for trial in trials
        if trial.id != candidate.id
        and (obs := observation_of_trial(trial)) is not None
        and obs.context == context
    ]
    if len(group) < SKIP_MIN_TRIALS:
        return None
    from tuner.perfmodel.fit import fit_costs

    model = fit_costs([obs for obs, _ in group])  # the group's costs: every bound's prediction
    for constraint in constraints:
        verdict = _judge(group, point, constraint, model)
        if verdict is not None:
            wanted = dict.fromkeys([*keys, *(c.metric for c in constraints)])
            told = {k: v for k in wanted if (v := predict_key(model, point, k)) is not None}
            return dataclasses.replace(verdict, values=told)
    return None


def _judge(
    group: Sequence[tuple[Any, Trial]], point: Any, bound: Constraint, model: Any
) -> SkipVerdict | None:
    """The verdict on one bound: its key predicted at ``point`` by ``model`` (the group's
    costs), the sure interval from the group's leave-one-out errors of that key."""
    from tuner.perfmodel.fit import fit_costs

    observations = [obs for obs, _ in group]
    predicted = predict_key(model, point, bound.metric)
    if predicted is None or predicted <= 0:
        return None
    worst, floor = 0.0, FLOOR_OF_BOUND * abs(bound.bound)
    for i, (obs, trial) in enumerate(group):
        measured = value_of(trial, bound.metric)
        guess = predict_key(fit_costs(observations[:i] + observations[i + 1 :]), obs.point,
                         bound.metric)  # fmt: skip
        if measured is None or guess is None or measured <= 0 or guess <= 0:
            return None  # a key the group cannot check: not sure of anything
        worst = max(worst, abs(math.log((guess + floor) / (measured + floor))))
    sure = max(SURE_FLOOR, SURE_FACTOR * worst)
    low, high = predicted * math.exp(-sure), predicted * math.exp(sure)
    if bound.met(low) or bound.met(high):
        return None
    return SkipVerdict(str(bound), predicted, low, high, len(group))


def predict_key(model: Any, point: Any, key: str) -> float | None:
    """One result key at ``point`` under the model's step costs (None: a key it cannot tell)."""
    from tuner.perfmodel.simulate import replay

    if key == "output_throughput":
        return float(model.predict(point).output_throughput)
    return replay(point, model.a, model.b, model.c).metric(key)


def skipper(
    store: TrialStore, study: str, constraints: Sequence[Constraint], keys: Sequence[str] = ()
) -> Callable[[Trial], SkipVerdict | None]:
    """The skip check of one search: a candidate judged on the study's trials as stored now,
    on the node of the study's latest measured trial (where it is about to run); ``keys``
    (the search's objectives) are predicted for the sampler with the verdict."""
    bounds = list(constraints)

    def check(candidate: Trial) -> SkipVerdict | None:
        if not bounds:
            return None
        trials = store.list(study=study)
        ran = [t for t in trials if t.status is TrialStatus.DONE and t.results]
        if not ran:
            return None
        latest = max(ran, key=lambda t: t.finished_at or t.created_at)
        placed = dataclasses.replace(
            candidate,
            platform=latest.platform,
            vllm_version=latest.vllm_version,
            gpu_names=list(latest.gpu_names),
        )
        try:
            return sure_miss(trials, placed, bounds, keys)
        except Exception:  # a model that fails skips nothing: the point runs
            return None

    return check


def record_skip(store: TrialStore, trial: Trial, verdict: SkipVerdict) -> Trial:
    """Store ``trial`` as skipped by the model: no engine, the verdict in its tags and reason."""
    trial.tags[SKIP_TAG] = verdict.to_dict()
    store.add(trial)
    return store.update_status(
        trial,
        TrialStatus.SKIPPED,
        failure_reason=f"not launched: {verdict.reason()} (tunelab tune --no-skip runs it)",
    )


def is_model_skip(trial: Trial) -> bool:
    """Whether the study model skipped ``trial`` (never launched, predicted to miss the SLO)."""
    return trial.status is TrialStatus.SKIPPED and isinstance(trial.tags.get(SKIP_TAG), dict)


def tell_skip(
    opt: Any, ot: Any, verdict: SkipVerdict, objectives: Sequence[str],
    constraints: Sequence[Constraint],
) -> TrialState:  # fmt: skip
    """Tell Optuna a point the model is sure misses the SLO: its predicted objectives and
    violations, as a measured miss would be told (the sampler learns the infeasible region
    alike), marked as the model's; pruned where the model cannot tell an objective.

    Returns:
        The Optuna state told.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    ot.set_user_attr(SKIP_TAG, verdict.to_dict())
    ot.set_user_attr("pruned_reason", verdict.reason()[:500])
    results = [verdict.values.get(m) for m in objectives]
    if any(v is None for v in results):
        opt.tell(ot, state=TrialState.PRUNED)
        return TrialState.PRUNED
    # The missed bound's key is predicted beyond it (its whole sure interval is): violated.
    violations = [c.violation(verdict.values.get(c.metric)) for c in constraints]
    for c, v in zip(constraints, violations, strict=True):
        ot.set_constraint(str(c), v)
    ot.set_user_attr("constraints", violations)
    ot.set_user_attr("meets_slo", False)
    opt.tell(ot, [float(v) for v in results if v is not None])
    return TrialState.COMPLETE
