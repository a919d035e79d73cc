"""Fitting the step costs to a study's trials, predicting with an interval, and keeping score.

The costs ``(a, b_cost, c)`` are the non-negative least-squares fit of every observation's
duration and the engine's mean inter-token latency, each equation scaled by its measured value so that every figure
counts by its relative error. The interval is the fit's own honesty: each calibration
trial is predicted from the others (leave one out), and the stated 80 % interval is the
80th percentile of those relative errors, never below :data:`MIN_HALF_WIDTH`, and wide
(:data:`FEW_POINTS_HALF_WIDTH`) while fewer than :data:`MIN_FOR_LOO` trials back it.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tuner.errors import TunelabError
from tuner.perfmodel.bands import interval
from tuner.perfmodel.observation import Observation, Point
from tuner.perfmodel.waves import duration_row, itl_row

__all__ = ["Accuracy", "Prediction", "StepModel", "accuracy", "calibrate", "fit_costs", "held_out"]

MIN_HALF_WIDTH = 0.05
FEW_POINTS_HALF_WIDTH = 0.5
MIN_FOR_LOO = 4
COVERAGE = 0.8


class ModelError(TunelabError, ValueError):
    """The observations cannot calibrate a model (too few, or of different contexts)."""


@dataclass(frozen=True)
class Prediction:
    """What the model expects of a point, with its 80 % interval (relative half-widths).

    Attributes:
        point: The point predicted.
        output_throughput: Output tokens per second.
        itl_ms: The engine's mean inter-token latency.
        throughput_band: Relative half-width of the throughput's 80 % interval.
        itl_band: Relative half-width of the ITL's 80 % interval.
    """

    point: Point
    output_throughput: float
    itl_ms: float
    throughput_band: float
    itl_band: float

    def throughput_interval(self) -> tuple[float, float]:
        return interval(self.output_throughput, self.throughput_band)

    def itl_interval(self) -> tuple[float, float]:
        return interval(self.itl_ms, self.itl_band)


@dataclass(frozen=True)
class StepModel:
    """Step costs fitted to one context's trials.

    Attributes:
        a: Seconds of a step whatever it holds (scheduling, launch, the weights' read).
        b: Seconds per running request in a decode step.
        c: Seconds per prefilled token.
        context: The context its trials share (see tuner.perfmodel.observation).
        trials: How many observations it was fitted on.
        throughput_band: Relative half-width of its throughput interval.
        itl_band: Relative half-width of its ITL interval.
    """

    a: float
    b: float
    c: float
    context: str
    trials: int
    throughput_band: float = FEW_POINTS_HALF_WIDTH
    itl_band: float = FEW_POINTS_HALF_WIDTH

    def predict(self, point: Point) -> Prediction:
        """The point's figures under these costs."""
        costs = np.array([self.a, self.b, self.c])
        duration = float(np.dot(duration_row(point), costs))
        itl = float(np.dot(itl_row(point), costs))
        tput = point.num_prompts * point.output_len / duration if duration > 0 else 0.0
        return Prediction(point, tput, itl * 1e3, self.throughput_band, self.itl_band)


def _solve(rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Non-negative least squares of three unknowns, by trying each set of free ones."""
    best, best_err = np.zeros(3), np.inf
    for size in (3, 2, 1):
        for free in itertools.combinations(range(3), size):
            sub = rows[:, list(free)]
            solution, *_ = np.linalg.lstsq(sub, targets, rcond=None)
            if (solution < 0).any():
                continue
            full = np.zeros(3)
            full[list(free)] = solution
            err = float(np.sum((rows @ full - targets) ** 2))
            if err < best_err:
                best, best_err = full, err
    return best


def _fit(observations: Sequence[Observation]) -> np.ndarray:
    rows, targets = [], []
    for obs in observations:
        duration = obs.point.num_prompts * obs.point.output_len / obs.output_throughput
        rows.append(np.array(duration_row(obs.point)) / duration)
        targets.append(1.0)
        rows.append(np.array(itl_row(obs.point)) / (obs.itl_ms / 1e3))
        targets.append(1.0)
    return _solve(np.array(rows), np.array(targets))


def calibrate(observations: Sequence[Observation]) -> StepModel:
    """The model of these observations (one context), its interval from leave-one-out errors.

    Raises:
        ModelError: No observation, or observations of different contexts.
    """
    if not observations:
        raise ModelError("no measured trial to calibrate on")
    contexts = {o.context for o in observations}
    if len(contexts) > 1:
        raise ModelError(
            "the trials differ in more than the modelled knobs (max-num-seqs, "
            "max-num-batched-tokens, concurrency, lengths, request count)"
        )
    model = fit_costs(observations)
    if len(observations) < MIN_FOR_LOO:
        return model
    score = held_out(observations, bands=False)
    return dataclasses.replace(
        model,
        throughput_band=_band(score.throughput_errors),
        itl_band=_band(score.itl_errors),
    )


def fit_costs(observations: Sequence[Observation]) -> StepModel:
    """The fitted costs alone, with the few-trials interval: no leave-one-out pass, for a
    caller that only needs the costs (a skip check fits once per measured trial)."""
    a, b, c = (float(x) for x in _fit(observations))
    return StepModel(a, b, c, observations[0].context, len(observations))


def _band(errors: Sequence[float]) -> float:
    ranked = sorted(abs(e) for e in errors)
    k = min(len(ranked) - 1, int(np.ceil(COVERAGE * len(ranked))) - 1)
    return max(MIN_HALF_WIDTH, ranked[k] * (1 + 1 / len(ranked)))


def held_out(observations: Sequence[Observation], *, bands: bool = True) -> Accuracy:
    """Each observation predicted by a model fitted on the others (leave one out).

    Args:
        observations: One context's observations.
        bands: Give each prediction the interval its own model would state (a calibration
            per left-out trial); False: the costs alone (what :func:`calibrate` needs).
    """
    out = Accuracy()
    for i, obs in enumerate(observations):
        rest = [o for j, o in enumerate(observations) if j != i]
        model = calibrate(rest) if bands else fit_costs(rest)
        out.add(obs, model.predict(obs.point))
    return out


@dataclass(frozen=True)
class Accuracy:
    """How far a model's predictions were from what was then measured.

    Attributes:
        rows: (observation, prediction) per measured point.
        throughput_errors: Relative errors of output throughput.
        itl_errors: Relative errors of the engine's mean ITL.
    """

    rows: list[tuple[Observation, Prediction]] = field(default_factory=list)
    throughput_errors: list[float] = field(default_factory=list)
    itl_errors: list[float] = field(default_factory=list)

    def add(self, obs: Observation, pred: Prediction) -> None:
        """Score one prediction against what was measured."""
        self.rows.append((obs, pred))
        self.throughput_errors.append(pred.output_throughput / obs.output_throughput - 1)
        self.itl_errors.append(pred.itl_ms / obs.itl_ms - 1)

    @property
    def median_abs_throughput_error(self) -> float:
        return statistics.median(abs(e) for e in self.throughput_errors)

    @property
    def median_abs_itl_error(self) -> float:
        return statistics.median(abs(e) for e in self.itl_errors)

    @property
    def coverage(self) -> float:
        """Share of measured figures (throughput and ITL) inside their stated 80 % interval."""
        inside = 0
        for obs, pred in self.rows:
            lo, hi = pred.throughput_interval()
            inside += lo <= obs.output_throughput <= hi
            lo, hi = pred.itl_interval()
            inside += lo <= obs.itl_ms <= hi
        return inside / (2 * len(self.rows)) if self.rows else 0.0


def accuracy(model: StepModel, measured: Sequence[Observation]) -> Accuracy:
    """The model's predictions for ``measured`` points against their figures."""
    out = Accuracy()
    for obs in measured:
        out.add(obs, model.predict(obs.point))
    return out
