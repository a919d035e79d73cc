"""Pruning: stop measuring a point whose interim throughput is clearly dominated.

A sweep point or an Optuna trial that, a short window into its measured run,
delivers far less than the best point seen so far will not become the best by
measuring to the end; stopping it frees its engine (and its GPUs) for the next
point. Stopping on a wrong guess loses a point, so the rule is conservative:

- **Readings**: the benchmark's rolling output rate (tokens/s over its last
  ~2 s, :class:`tuner.bench.progress.BenchProgress`), taken at most every
  ``READING_EVERY_S`` of the measured run and keyed by the elapsed time in
  tenths of a second (the "step" of Optuna's intermediate values).
- **Same window**: the candidate is compared with each reference over the
  window both have measured (readings up to the shorter of the two elapsed
  times), so ramp-up at the start of a run is in both sides alike.
- **Noise seen so far**: the spread (coefficient of variation) of each side's
  readings in that window; the gap must exceed ``z`` times the combined
  spread, and never less than ``noise_floor``. Readings of a rolling window
  are correlated, so the spread is not divided by the number of readings: the
  rule asks for a gap larger than the run-to-run wobble itself.
- **Never on one sample**: both sides need ``min_readings`` readings (at
  least 3) and ``min_elapsed_s`` of measured run before any verdict; one
  reading, however low, prunes nothing.

The rule (:func:`dominated`) is pure, so the sweep (:class:`PruneMonitor`,
fed by the runner's progress events) and Optuna (:func:`make_optuna_pruner`,
a ``BasePruner`` over the trials' intermediate values, driven by
``Trial.report`` / ``Trial.should_prune``) judge alike. A pruned trial is
recorded as stopped (status ``interrupted`` until the trial model has a
``pruned`` status) with ``tags["pruned"]`` holding the decision and a
failure reason starting ``pruned:``; :func:`is_pruned` reads it back.

Only throughput objectives are pruned (the interim rate is their proxy); a
latency objective or a Pareto search measures every point to the end.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.errors import TunelabError
from tuner.trials.model import PRUNED_TAG

if TYPE_CHECKING:
    import optuna

    from tuner.bench.progress import BenchProgress
    from tuner.trials.model import Trial

READING_EVERY_S = 0.5
PRUNABLE_OBJECTIVES = ("output_throughput", "total_token_throughput", "request_throughput")

Readings = Sequence[tuple[int, float]]


class PruneError(TunelabError, ValueError):
    """A pruning rule that could prune on too little evidence; says what to change."""


@dataclass(frozen=True)
class PruneRule:
    """When a point counts as clearly dominated.

    Attributes:
        z: How many times the noise the gap must exceed.
        min_readings: Readings each side needs in the common window (>= 3).
        min_elapsed_s: Measured seconds before the first verdict.
        noise_floor: The smallest noise assumed (relative), however steady
            the readings look: a 2-reading calm is no proof of steadiness.
    """

    z: float = 3.0
    min_readings: int = 4
    min_elapsed_s: float = 1.5
    noise_floor: float = 0.05

    def __post_init__(self) -> None:
        if self.min_readings < 3:
            raise PruneError(
                f"pruning needs at least 3 readings per point, got {self.min_readings}: "
                "one noisy reading must never stop a point"
            )
        if self.z <= 0 or self.noise_floor <= 0:
            raise PruneError("pruning needs z > 0 and noise_floor > 0")


@dataclass(frozen=True)
class PruneDecision:
    """Why a point was stopped: its interim rate, the reference's, and the noise.

    Attributes:
        reference: The dominating trial (tunelab id, or Optuna number).
        step: The candidate's elapsed measured time, in tenths of a second.
        window_s: The common window compared, in seconds.
        interim: The candidate's mean rate over the window (tokens/s).
        best: The reference's mean rate over the same window (tokens/s).
        noise: The combined relative spread of both sides' readings.
        readings: The candidate's readings in the window.
    """

    reference: str
    step: int
    window_s: float
    interim: float
    best: float
    noise: float
    readings: int

    @property
    def gap(self) -> float:
        """How far below the reference the candidate is (0.6 = 60 % below)."""
        return 1.0 - self.interim / self.best if self.best > 0 else 0.0

    def reason(self) -> str:
        """The failure reason stored on the trial (starts with ``pruned:``)."""
        return (
            f"pruned: interim {self.interim:,.0f} tok/s over {self.window_s:.1f} s is "
            f"{self.gap:.0%} below trial {self.reference[:8]} ({self.best:,.0f} tok/s in the "
            f"same window); the noise seen so far is ±{self.noise:.0%}, so it cannot catch up"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "step": self.step,
            "window_s": round(self.window_s, 3),
            "interim": self.interim,
            "best": self.best,
            "noise": self.noise,
            "gap": self.gap,
            "readings": self.readings,
        }


def _spread(values: Sequence[float]) -> float:
    """Coefficient of variation of readings (0 for a flat or empty series)."""
    mean = statistics.fmean(values)
    if mean <= 0 or len(values) < 2:
        return 0.0
    return statistics.stdev(values) / mean


def _judge(
    candidate: Readings, ref_id: str, reference: Readings, rule: PruneRule
) -> tuple[float, PruneDecision] | None:
    """Candidate vs one reference over their common window: (score, decision) if dominated."""
    now = candidate[-1][0]
    common = min(now, reference[-1][0])
    mine = [v for s, v in candidate if s <= common]
    theirs = [v for s, v in reference if s <= common]
    if len(mine) < rule.min_readings or len(theirs) < rule.min_readings:
        return None
    if common < rule.min_elapsed_s * 10:
        return None
    best, interim = statistics.fmean(theirs), statistics.fmean(mine)
    if best <= 0:
        return None
    noise = max(rule.noise_floor, math.hypot(_spread(mine), _spread(theirs)))
    gap = math.inf if interim <= 0 else math.log(best / interim)
    if gap <= rule.z * noise:
        return None
    decision = PruneDecision(ref_id, now, common / 10.0, interim, best, noise, len(mine))
    return gap / noise, decision


def dominated(
    candidate: Readings, references: Mapping[str, Readings], rule: PruneRule | None = None
) -> PruneDecision | None:
    """The core rule: is ``candidate`` clearly below the best reference, beyond the noise?

    Args:
        candidate: The point's readings so far, ``(step, tokens/s)`` in step
            order (step = measured tenths of a second).
        references: Readings of the other points (finished or still running),
            by trial id.
        rule: The thresholds (default :class:`PruneRule`).

    Returns:
        The decision against the most clearly dominating reference, or None
        (keep measuring) — always None below ``min_readings`` readings.
    """
    rule = rule or PruneRule()
    if len(candidate) < rule.min_readings:
        return None
    if candidate[-1][0] < rule.min_elapsed_s * 10:
        return None
    verdicts = [
        judged
        for ref_id, readings in references.items()
        if readings and (judged := _judge(candidate, ref_id, readings, rule)) is not None
    ]
    if not verdicts:
        return None
    return max(verdicts, key=lambda item: item[0])[1]


def prunable(objective: str) -> bool:
    """Whether an objective can be judged on the interim rate (throughput keys only)."""
    return objective in PRUNABLE_OBJECTIVES


def is_pruned(trial: Trial) -> bool:
    """True for a trial stopped by pruning (its tag holds the decision)."""
    return isinstance(trial.tags.get(PRUNED_TAG), dict)


@dataclass
class ReadingLog:
    """One trial's readings, thinned to one per ``READING_EVERY_S``."""

    readings: list[tuple[int, float]] = field(default_factory=list)

    def add(self, progress: BenchProgress) -> bool:
        """Record a reading from a progress event; True when one was taken."""
        if progress.phase != "running":
            return False
        step = int(progress.elapsed_s * 10)
        if self.readings and step - self.readings[-1][0] < READING_EVERY_S * 10:
            return False
        self.readings.append((step, float(progress.tokens_per_s)))
        return True


@dataclass
class PruneMonitor:
    """Judges the trials of one sweep step against each other as their progress arrives.

    A trial is compared with the other points of the same step (not its own
    repeats): finished ones that met the SLO, and — when the step has no SLO,
    so a running peer can only get better or stay — running ones too, which
    is what lets a wave of side-by-side points stop its slowest members.

    Attributes:
        rule: The thresholds.
        peers_running: Whether running peers count as references.
    """

    rule: PruneRule = field(default_factory=PruneRule)
    peers_running: bool = True
    _logs: dict[str, ReadingLog] = field(default_factory=dict, repr=False)
    _point: dict[str, str] = field(default_factory=dict, repr=False)
    _final: dict[str, bool] = field(default_factory=dict, repr=False)

    def enrol(self, trial: Trial, point: str) -> None:
        """Watch ``trial``, a measurement of ``point`` (repeats share a point)."""
        self._logs[trial.id] = ReadingLog()
        self._point[trial.id] = point

    def finished(self, trial: Trial, usable: bool) -> None:
        """``trial`` is final; ``usable``: it finished and may serve as a reference."""
        self._final[trial.id] = usable

    def observe(self, trial: Trial, progress: BenchProgress) -> PruneDecision | None:
        """Record a progress event of ``trial``; a decision when it is now dominated."""
        log = self._logs.get(trial.id)
        if log is None or not log.add(progress):
            return None
        point = self._point[trial.id]
        references = {
            other: peer.readings
            for other, peer in self._logs.items()
            if self._point[other] != point and self._counts(other)
        }
        return dominated(log.readings, references, self.rule)

    def _counts(self, trial_id: str) -> bool:
        if trial_id in self._final:
            return self._final[trial_id]
        return self.peers_running


def make_optuna_pruner(
    rule: PruneRule | None = None, *, peers_running: bool = True
) -> optuna.pruners.BasePruner:
    """An Optuna pruner applying :func:`dominated` to the trials' intermediate values.

    ``Trial.should_prune()`` asks it after each ``Trial.report(rate, step)``.
    References are the study's complete trials that met the SLO
    (``meets_slo`` user attr) and, when ``peers_running``, its running ones.
    The latest decision per trial number is kept in ``decisions`` for the
    trial's record. Built lazily so importing this module loads no Optuna.
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    import optuna

    # Deferred: heavy (optuna): loaded only on the path that needs it.
    from optuna.trial import TrialState

    class DominatedPruner(optuna.pruners.BasePruner):
        """Prunes a trial whose interim rate is clearly below a peer's in the same window."""

        def __init__(self) -> None:
            self.rule = rule or PruneRule()
            self.decisions: dict[int, PruneDecision] = {}

        def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
            candidate = sorted(trial.intermediate_values.items())
            states = (TrialState.COMPLETE, TrialState.RUNNING) if peers_running else None
            references: dict[str, Readings] = {}
            for other in study.get_trials(deepcopy=False, states=states or (TrialState.COMPLETE,)):
                if other.number == trial.number or not other.intermediate_values:
                    continue
                if (
                    other.state is TrialState.COMPLETE
                    and other.user_attrs.get("meets_slo") is False
                ):
                    continue
                key = str(other.user_attrs.get("tunelab_trial_id") or other.number)
                references[key] = sorted(other.intermediate_values.items())
            decision = dominated(candidate, references, self.rule)
            if decision is not None:
                self.decisions[trial.number] = decision
            return decision is not None

    return DominatedPruner()
