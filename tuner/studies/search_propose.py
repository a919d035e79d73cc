"""The point a search launches next when the study model sees a better one: its proposal.

Skipping sure misses (:mod:`tuner.studies.search_skip`) saves a launch only when the sampler
happens to ask one; the launches to the winner are spent mostly on the sampler's random
start-up points and on its slow walk towards the boundary of the SLO. Once the model of a
context stands on :data:`~tuner.studies.search_skip.SKIP_MIN_TRIALS` measured trials, it
predicts every point of the space's grid in that context (the objective from the wave
arithmetic, each SLO key from the request-by-request replay); the best point predicted to meet
the SLO, not yet tried, is proposed — enqueued in the Optuna study, so the sampler learns from
its measurement as from its own asks — when it is predicted to beat the best measured point
that met the SLO. A wrong proposal costs one launch and corrects the model (its measurement
is a trial of the context); once the model sees nothing better than what was measured, the
sampler explores on its own. ``tunelab tune --no-skip`` (no study model) never proposes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.studies.common import meets, value_of
from tuner.studies.search_skip import SKIP_MIN_TRIALS, predict_key
from tuner.studies.space import Constraint, Space, SpaceError
from tuner.studies.stats import Direction, metric_direction
from tuner.trials.model import Trial, TrialStatus

if TYPE_CHECKING:
    from tuner.trials.store import TrialStore

__all__ = [
    "GRID_LIMIT",
    "PROPOSE_TAG",
    "Proposal",
    "best_proposal",
    "grid",
    "proposer",
    "values_key",
]

PROPOSE_TAG = "model_proposed"
GRID_LIMIT = 4096  # points predicted per ask at most: a larger space is not gridded


@dataclass(frozen=True)
class Proposal:
    """A point the study model predicts beats every measured one under the SLO.

    Attributes:
        values: The point (the space's keys).
        predicted: The model's value of the objective and of each SLO key there.
        objective: The key optimised.
        best: The best measured value of it that met the SLO (None: none met it yet).
        trials: The measured trials the model stands on.
    """

    values: dict[str, Any]
    predicted: dict[str, float]
    objective: str
    best: float | None
    trials: int

    def reason(self) -> str:
        """``the study model predicts output_throughput ~2,610 (best measured 2,100) meeting
        the SLO (p99_ttft_ms ~84), from 5 measured trials``."""
        value = self.predicted.get(self.objective)
        best = (
            "none measured met the SLO" if self.best is None else f"best measured {_num(self.best)}"
        )
        slo = ", ".join(f"{k} ~{_num(v)}" for k, v in self.predicted.items() if k != self.objective)
        return (
            f"the study model predicts {self.objective} ~{_num(value or 0.0)} ({best})"
            f"{f' meeting the SLO ({slo})' if slo else ''}, from {self.trials} measured trials"
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def describe_proposal(entry: Mapping[str, Any]) -> str:
    """One proposed point of a search report (the proposal's fields, ``measured`` and
    ``met_slo`` added once it ran), as every face prints it."""
    values = " ".join(f"{k}={v}" for k, v in (entry.get("values") or {}).items())
    known = {f.name for f in dataclasses.fields(Proposal)}
    proposal = Proposal(**{k: v for k, v in entry.items() if k in known})
    measured = entry.get("measured")
    ran = (
        "; measured "
        + (f"{_num(measured)}" if isinstance(measured, int | float) else "nothing")
        + (", met the SLO" if entry.get("met_slo") else ", missed the SLO")
    )
    return f"proposed {values or 'a point'}: {proposal.reason()}{ran}"


def _num(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def values_key(values: Mapping[str, Any]) -> str:
    """One point's identity across the store's JSON and Optuna's typed values."""
    return json.dumps(dict(values), sort_keys=True, default=str)


def grid(space: Space) -> list[dict[str, Any]] | None:
    """Every point of ``space`` (listed values, int ranges of at most 64); None for a space
    with a float range or more than :data:`GRID_LIMIT` points: the model proposes nothing."""
    try:
        axes = [p.values() for p in space.params]
    except SpaceError:
        return None
    size = 1
    for axis in axes:
        size *= len(axis)
    if size > GRID_LIMIT or not axes:
        return None
    keys = [p.key for p in space.params]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes)]


def best_proposal(
    trials: Sequence[Trial],
    candidates: Sequence[tuple[dict[str, Any], Trial]],
    constraints: Sequence[Constraint],
    objective: str,
) -> Proposal | None:
    """The untried candidate the model of its context predicts best under ``constraints``,
    when it is predicted to beat the best measured trial that met them; None otherwise.

    Args:
        trials: The study's trials as stored (measured ones calibrate, every one is "tried").
        candidates: The space's points and the trials they would be (placed on the node).
        constraints: The SLO bounds a proposal must be predicted to meet.
        objective: The key to optimise (its direction from its name).
    """
    from tuner.perfmodel.fit import fit_costs
    from tuner.perfmodel.observation import context_text, observation_of_trial, trial_parts

    higher = metric_direction(objective) is Direction.HIGHER
    tried = {values_key(t.tags.get("values") or {}) for t in trials}
    groups: dict[str, list[Any]] = {}
    for trial in trials:
        if (obs := observation_of_trial(trial)) is not None:
            groups.setdefault(obs.context, []).append(obs)
    measured = [
        v for t in trials if meets(t, constraints) and (v := value_of(t, objective)) is not None
    ]
    best = (max(measured) if higher else min(measured)) if measured else None
    models: dict[str, Any] = {}
    ranked: list[tuple[float, dict[str, Any], Any, Any, int]] = []
    for values, candidate in candidates:
        parts = trial_parts(candidate) if values_key(values) not in tried else None
        if parts is None:
            continue
        point, context = parts[0], context_text(parts[1])
        group = groups.get(context, [])
        if len(group) < SKIP_MIN_TRIALS:
            continue
        if context not in models:
            models[context] = fit_costs(group)
        value = predict_key(models[context], point, objective)
        if value is None or (best is not None and (value <= best if higher else value >= best)):
            continue
        ranked.append((value, values, point, models[context], len(group)))
    # Best predicted first; the first predicted to meet every bound is the proposal (the SLO
    # keys' replays are the cost: only as many as it takes to find it).
    ranked.sort(key=lambda r: -r[0] if higher else r[0])
    for value, values, point, model, count in ranked:
        predicted = {objective: value}
        for c in constraints:
            if c.metric not in predicted:
                got = predict_key(model, point, c.metric)
                if got is None:
                    break
                predicted[c.metric] = got
        else:
            if all(c.met(predicted[c.metric]) for c in constraints):
                return Proposal(dict(values), predicted, objective, best, count)
    return None


def proposer(
    store: TrialStore,
    study: str,
    space: Space,
    trial_of: Callable[[dict[str, Any]], Trial],
    objective: str,
) -> Callable[[set[str]], Proposal | None]:
    """The proposal check of one search: the study's grid judged on its trials as stored now,
    placed on the node of its latest measured trial; ``trial_of`` builds a point's trial as
    the search would. The returned check takes the points in flight (never proposed again)."""
    points = grid(space)

    def check(in_flight: set[str]) -> Proposal | None:
        if not points:
            return None
        trials = store.list(study=study)
        ran = [t for t in trials if t.status is TrialStatus.DONE and t.results]
        if len(ran) < SKIP_MIN_TRIALS:
            return None
        latest = max(ran, key=lambda t: t.finished_at or t.created_at)
        candidates = [
            (values, dataclasses.replace(
                trial_of(values), platform=latest.platform, vllm_version=latest.vllm_version,
                gpu_names=list(latest.gpu_names)))
            for values in points
            if values_key(values) not in in_flight
        ]  # fmt: skip
        try:
            return best_proposal(trials, candidates, space.constraints, objective)
        except Exception:  # a model that fails proposes nothing: the sampler asks
            return None

    return check
