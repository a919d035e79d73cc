"""The winner of a study: best by the objective among trials that meet the SLO, with its margin.

Trials of the same config under the same workload are one *point*; its
repeats (A/B arms, sweep repeats, a search that proposed a point twice) are
pooled, so the winner is the point with the best mean and the margin over the
runner-up is a Welch interval over their repeats (tuner.studies.stats). With
a single run on either side the noise is unknown, and the statement says so
rather than presenting a difference as a win; ``tunelab ab`` is the way to
settle it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.errors import TunelabError
from tuner.studies.common import meets, point_key, representative, value_of
from tuner.studies.pruning import is_pruned
from tuner.studies.search_skip import is_model_skip
from tuner.studies.space import Constraint, SpaceError, parse_constraint
from tuner.studies.stats import (
    Comparison,
    Direction,
    StatsError,
    Verdict,
    compare,
    format_relative,
    metric_direction,
)
from tuner.trials.model import TrialStatus

if TYPE_CHECKING:
    from tuner.trials.model import Trial


class WinnerError(TunelabError, ValueError):
    """No winner can be named; the message says why and what to run."""


@dataclass
class Point:
    """One config under one workload, with its finished trials."""

    key: str
    objective: str
    trials: list[Trial] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples)

    def representative(self) -> Trial:
        """The point's trial to show or export: the repeat closest to the point's mean."""
        return representative(self.trials, self.objective)

    def to_dict(self) -> dict[str, Any]:
        trial = self.representative()
        return {
            "trial": trial.id,
            "trials": [t.id for t in self.trials],
            "config": trial.config.canonical(),
            "config_id": trial.config_id,
            "values": trial.tags.get("values"),
            "arm": trial.arm,
            "mean": self.mean,
            "n": len(self.samples),
            "samples": self.samples,
        }


@dataclass
class WinnerReport:
    """The winner, the runner-up and the margin between them."""

    study: str
    objective: str
    constraints: list[str]
    winner: Point
    runner_up: Point | None
    margin: Comparison | None
    statement: str
    excluded: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        way = metric_direction(self.objective)
        return {
            "study": self.study,
            "objective": self.objective,
            "direction": way.value,
            "constraints": self.constraints,
            "winner": self.winner.to_dict(),
            "runner_up": self.runner_up.to_dict() if self.runner_up else None,
            "margin": self.margin.to_dict() if self.margin else None,
            "statement": self.statement,
            "excluded": self.excluded,
        }


def study_constraints(trials: Sequence[Trial]) -> list[Constraint]:
    """The SLO a study recorded in its trials' tags (``slo``), if any.

    Raises:
        WinnerError: the recorded SLO does not parse (a hand-edited or hostile
            store): the winner is not named against a guessed SLO.
    """
    for t in trials:
        slo = t.tags.get("slo")
        if slo and not t.is_probe:  # a probe's SLO is its search's, one text (capacity_steps)
            try:
                return [parse_constraint(s) for s in slo]
            except (SpaceError, TypeError) as exc:
                fix = "pass the SLO to judge by with --slo METRIC<=VALUE"
                raise WinnerError(
                    f"trial {t.short_id} of the study records an SLO that cannot be read "
                    f"({exc}); {fix}",
                    fix=fix,
                ) from None
    return []


def _qualifying(
    trials: Sequence[Trial], goal: str, slo: Sequence[Constraint]
) -> tuple[dict[str, Point], dict[str, int]]:
    """The finished trials that qualify, grouped by point, and how many were left out, by why."""
    excluded = {
        "skipped by the rules": 0,
        "not launched (the study model was sure they miss the SLO)": 0,
        "stopped early (pruned)": 0,
        "not finished": 0,
        "misses SLO": 0,
        "no objective": 0,
        "capacity probes (one load of a search)": 0,
    }
    points: dict[str, Point] = {}
    for t in trials:
        if t.is_probe:
            excluded["capacity probes (one load of a search)"] += 1
            continue
        if is_model_skip(t):
            excluded["not launched (the study model was sure they miss the SLO)"] += 1
            continue
        if t.status is TrialStatus.SKIPPED:
            excluded["skipped by the rules"] += 1
            continue
        if is_pruned(t):
            excluded["stopped early (pruned)"] += 1
            continue
        if t.status is not TrialStatus.DONE:
            excluded["not finished"] += 1
            continue
        value = value_of(t, goal)
        if value is None:
            excluded["no objective"] += 1
            continue
        if not meets(t, slo):
            excluded["misses SLO"] += 1
            continue
        point = points.setdefault(point_key(t), Point(point_key(t), goal))
        point.trials.append(t)
        point.samples.append(value)
    return points, excluded


def _margin(
    goal: str, winner: Point, runner: Point | None, way: Direction, confidence: float
) -> tuple[Comparison | None, str]:
    """The winner's margin over the runner-up, and the sentence that says what it means."""
    if runner is None:
        return (
            None,
            f"only one qualifying point: {goal} {winner.mean:.4g} (n={len(winner.samples)})",
        )
    margin = compare(goal, runner.samples, winner.samples, direction=way, confidence=confidence)
    rel = format_relative(margin)
    if margin.verdict is Verdict.B_BETTER:
        return margin, (
            f"winner beats the runner-up on {goal} by {rel} ({confidence:.0%} interval over "
            f"{margin.b.n} vs {margin.a.n} runs): a real margin"
        )
    if margin.a.n < 2 or margin.b.n < 2:
        return margin, (
            f"winner leads the runner-up on {goal} by {margin.rel_diff:+.1%}, but one of them "
            "ran only once: the noise is unknown, so this is not yet a win — confirm with "
            "`tunelab ab` (repeats >= 3)"
        )
    return margin, (
        f"winner leads the runner-up on {goal} by {rel}, inside the noise "
        f"({confidence:.0%} interval contains 0): no significant difference"
    )


def pick_winner(
    trials: Sequence[Trial],
    *,
    study: str,
    objective: str | None = None,
    constraints: Sequence[Constraint] | None = None,
    confidence: float = 0.95,
) -> WinnerReport:
    """Name the best point of ``trials`` and its margin over the runner-up.

    Args:
        trials: The study's trials (any status; unfinished ones are excluded).
        study: Study name, for the report.
        objective: Result key to rank by (default: the trials' own objective).
        constraints: SLO bounds (default: the SLO recorded with the study).
        confidence: Level of the margin's interval.

    Raises:
        WinnerError: No finished trial, or none meets the SLO.
    """
    if not trials:
        raise WinnerError(
            f"study {study!r} has no trials; run `tunelab tune` or `tunelab sweep` first"
        )
    goal = objective or trials[0].objective
    try:
        way = metric_direction(goal)
    except StatsError:  # a stored objective no tunelab writes (a hand-edited or hostile store)
        raise WinnerError(
            f"study {study!r} is ranked by {goal[:80]!r}, of which tunelab cannot tell whether "
            "higher or lower is better; pass --objective with a result key such as "
            "output_throughput or p99_ttft_ms"
        ) from None
    slo = list(constraints) if constraints is not None else study_constraints(trials)
    points, excluded = _qualifying(trials, goal, slo)
    if not points:
        why = ", ".join(f"{n} {k}" for k, n in excluded.items() if n)
        raise WinnerError(
            f"no trial of study {study!r} qualifies for {goal}"
            + (f" under the SLO {', '.join(map(str, slo))}" if slo else "")
            + f" ({why}); relax the SLO or run more trials"
        )
    ranked = sorted(points.values(), key=lambda p: p.mean, reverse=way is Direction.HIGHER)
    winner = ranked[0]
    runner = ranked[1] if len(ranked) > 1 else None
    margin, statement = _margin(goal, winner, runner, way, confidence)
    return WinnerReport(
        study=study,
        objective=goal,
        constraints=[str(c) for c in slo],
        winner=winner,
        runner_up=runner,
        margin=margin,
        statement=statement,
        excluded={k: n for k, n in excluded.items() if n},
    )
