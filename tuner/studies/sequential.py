"""Sequential stopping for A/B: look after every round, stop once the answer is clear.

Looking at an A/B after every round and stopping at the first "significant"
interval inflates false wins: with five looks at a nominal 5 % the chance of a
false win on two identical configs is about 14 % (Armitage, McPherson & Rowe
1969). The method here keeps the error rate at the nominal alpha with a
**group-sequential design and an alpha-spending function** (Lan & DeMets
1983): a look at information fraction ``t`` (the share of the maximum
repeats measured so far) may spend at most ``alpha(t)`` of the error in
total, so the nominal level of each look is stricter than alpha, and the
boundaries follow from the joint distribution of the statistic over the looks
(recursive numerical integration, Armitage-McPherson-Rowe; Jennison &
Turnbull, *Group Sequential Methods*, 2000, ch. 7 and 19). Two spending
functions are offered:

- ``pocock`` (Lan-DeMets Pocock type, ``alpha * ln(1 + (e - 1) t)``): spends
  evenly, so a large effect stops at the first look that can see it —
  the default, because the point of stopping here is to skip engine launches
  when a change is big;
- ``obf`` (Lan-DeMets O'Brien-Fleming type, ``2 - 2 Phi(z / sqrt(t))``):
  nearly nothing early and almost the full alpha at the last look, for users
  who want the final look to be as strong as a fixed-size A/B;
- ``front`` (Kim-DeMets power family ``alpha * t**0.25``): most of alpha at
  the first look, so a large change stops at 2 launches per arm; meant with
  ``pooled`` looks (Student's t, df = n_A + n_B - 2, instead of Welch's 1-2 df
  at 2 launches), whose boundaries :func:`t_levels` computes exactly for the
  t statistic by simulating its scale-free null law (docs/studies.md: the
  false-win rate and the power it trades).

Each look turns its boundary into an interval that holds **at every look at
once** — the repeated confidence interval of Jennison & Turnbull (1989) —
taken on the ratio B/A like the fixed A/B (Welch on the logs,
tuner.studies.stats): the boundary's nominal two-sided level ``p_k`` becomes
the Welch t interval at confidence ``1 - p_k``. Because the intervals cover
at every look simultaneously, stopping when one excludes "no change" (a
win) or lies wholly inside ``+-equivalence`` (no difference that big) both
keep their error rates, whatever the rule for stopping. The normal-theory
boundary is carried over to Welch's t through its nominal level, which is
an approximation at 2-3 repeats per arm; ``benchmarks/ab_sequential.py``
measures the false-win rate by simulation rather than assuming it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from statistics import NormalDist
from typing import TYPE_CHECKING

from tuner.errors import TunelabError
from tuner.studies.stats import Comparison, Scale, StatsError, Verdict, compare
from tuner.trials.tdist import t_cdf

if TYPE_CHECKING:
    import numpy as np

_NORMAL = NormalDist()
# Kim-DeMets power family alpha * t**rho; rho < 1 spends early ("front"):
# with the first look at t = 1/3 (2 of 6 launches per arm) it may spend
# 3**-0.25 = 76 % of alpha there (Pocock type: 45 %).
FRONT_RHO = 0.25
# Null paths simulated for the boundaries of pooled-t looks (fixed seed: a stored
# A/B replays to the same levels).
_MC_PATHS = 200_000
_MC_SEED = 20261123
# Integration grid for the boundary recursion: step and half-width in z units.
_GRID_STEP = 0.02
_GRID_HALF_WIDTH = 9.0


class SequentialError(TunelabError, ValueError):
    """A sequential design that cannot work; the message says what to change."""


class Spending(StrEnum):
    """How the error rate is spent over the looks (Lan-DeMets types)."""

    POCOCK = "pocock"
    OBRIEN_FLEMING = "obf"
    FRONT = "front"


class Decision(StrEnum):
    """What a look decided."""

    CONTINUE = "continue"
    DIFFERENT = "different"
    EQUIVALENT = "equivalent"
    EXHAUSTED = "max repeats reached"


def spent(t: float, alpha: float, spending: Spending) -> float:
    """Total two-sided error that may be spent by information fraction ``t`` in (0, 1]."""
    t = min(max(t, 0.0), 1.0)
    if t <= 0.0:
        return 0.0
    if spending is Spending.POCOCK:
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending is Spending.FRONT:
        share: float = t**FRONT_RHO  # t > 0 here, so a real number
        return alpha * share
    z = _NORMAL.inv_cdf(1.0 - alpha / 2.0)
    return 2.0 - 2.0 * _NORMAL.cdf(z / math.sqrt(t))


@lru_cache(maxsize=256)
def boundaries(times: tuple[float, ...], alpha: float, spending: Spending) -> tuple[float, ...]:
    """Two-sided z boundaries c_k for looks at information fractions ``times``.

    ``P(|Z_j| < c_j for j < k and |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1})``
    under no difference, with Z the standardized statistic of a Brownian
    motion observed at ``times`` (independent increments). Computed by
    propagating the density of Z over a grid from look to look.

    Raises:
        SequentialError: Times not increasing in (0, 1], or alpha not in (0, 1).
    """
    if not 0.0 < alpha < 1.0:
        raise SequentialError(f"alpha must be in (0, 1), got {alpha}")
    if not times or any(not 0.0 < t <= 1.0 for t in times):
        raise SequentialError(f"information fractions must lie in (0, 1], got {times}")
    if any(b <= a for a, b in itertools.pairwise(times)):
        raise SequentialError(f"information fractions must increase, got {times}")
    # numpy (~0.15 s to import) only when boundaries are computed: the TUI reads
    # A/B reports at start-up without ever running one.
    import numpy as np

    grid = np.arange(-_GRID_HALF_WIDTH, _GRID_HALF_WIDTH + _GRID_STEP / 2, _GRID_STEP)
    density = np.exp(-(grid**2) / 2.0) / math.sqrt(2.0 * math.pi)
    out: list[float] = []
    previous_spent = 0.0
    previous_t = 0.0
    for k, t in enumerate(times):
        if k > 0:
            # Z_k sqrt(t_k) = Z_{k-1} sqrt(t_{k-1}) + N(0, t_k - t_{k-1}).
            # Cells straddling the last boundary count with the part inside it.
            share = np.clip((out[-1] - np.abs(grid)) / _GRID_STEP + 0.5, 0.0, 1.0)
            inside = share > 0
            src = grid[inside]
            weight = density[inside] * share[inside] * _GRID_STEP
            step = math.sqrt(t - previous_t)
            mean = src * math.sqrt(previous_t) / math.sqrt(t)
            scale = step / math.sqrt(t)
            kernel = np.exp(-(((grid[:, None] - mean[None, :]) / scale) ** 2) / 2.0)
            density = kernel @ weight / (scale * math.sqrt(2.0 * math.pi))
        budget = spent(t, alpha, spending) - previous_spent
        out.append(_crossing(grid, density, budget) if k > 0 else _first(budget))
        previous_spent += budget
        previous_t = t
    return tuple(out)


@lru_cache(maxsize=64)
def t_levels(
    looks: tuple[tuple[int, int], ...], times: tuple[float, ...], alpha: float, spending: Spending
) -> tuple[float, ...]:
    """Nominal two-sided levels of pooled-t looks at (n_A, n_B), exact for the t statistic.

    The normal-theory boundaries (:func:`boundaries`) carried to t through
    their nominal levels let the error creep above alpha at 2-3 repeats per
    arm (the looks share their variance estimate). The pooled t statistic's
    joint law over the looks does not depend on the noise level (it is scale
    free), so it is simulated once per look schedule under no difference:
    each look's critical value leaves exactly the alpha the spending function
    allows at that look among the paths that have not crossed before. The
    critical value c_k becomes the level 2 (1 - F_t(c_k; n_A + n_B - 2)), so
    the pooled interval at 1 - level is the boundary itself.
    """
    import numpy as np  # see boundaries(): deferred for start-up time

    rng = np.random.default_rng(_MC_SEED)
    a = rng.standard_normal((_MC_PATHS, max(n for n, _ in looks)))
    b = rng.standard_normal((_MC_PATHS, max(n for _, n in looks)))
    alive = np.ones(_MC_PATHS, dtype=bool)
    out: list[float] = []
    previous = 0.0
    for (n_a, n_b), t in zip(looks, times, strict=True):
        xa, xb = a[:, :n_a], b[:, :n_b]
        df = n_a + n_b - 2
        ss = ((xa - xa.mean(1, keepdims=True)) ** 2).sum(1)
        ss += ((xb - xb.mean(1, keepdims=True)) ** 2).sum(1)
        stat = np.abs(xb.mean(1) - xa.mean(1)) / np.sqrt(ss / df * (1.0 / n_a + 1.0 / n_b))
        budget = spent(t, alpha, spending) - previous
        previous += budget
        crossing = round(budget * _MC_PATHS)
        remaining = np.sort(stat[alive])[::-1]
        if crossing <= 0 or not len(remaining):
            out.append(0.0)
            continue
        c = float(remaining[min(crossing, len(remaining)) - 1])
        alive &= stat < c
        out.append(2.0 * (1.0 - t_cdf(c, df)))
    return tuple(out)


def _first(budget: float) -> float:
    return _NORMAL.inv_cdf(1.0 - budget / 2.0) if budget > 0 else math.inf


def _crossing(grid: np.ndarray, density: np.ndarray, budget: float) -> float:
    """The c with mass ``budget`` of ``density`` outside (-c, c) (symmetric density)."""
    if budget <= 0:
        return math.inf
    import numpy as np  # see boundaries(): deferred for start-up time

    half = grid >= 0
    z = grid[half]
    upper = density[half] * _GRID_STEP
    tail = np.cumsum(upper[::-1])[::-1] * 2.0  # mass at |Z| >= z
    below = np.nonzero(tail <= budget)[0]
    if len(below) == 0:
        return float(z[-1])
    i = int(below[0])
    if i == 0:
        return 0.0
    # Linear interpolation between the grid points around the crossing.
    hi_mass, lo_mass = tail[i - 1], tail[i]
    frac = (hi_mass - budget) / (hi_mass - lo_mass) if hi_mass > lo_mass else 0.0
    # tail[j] is the mass of the cells from z[j] up, i.e. of |Z| >= z[j] - step/2.
    return float(z[i - 1] + frac * (z[i] - z[i - 1]) - _GRID_STEP / 2.0)


@dataclass(frozen=True)
class SequentialDesign:
    """The stopping rule of a sequential A/B.

    Attributes:
        max_repeats: Launches per arm at most (the last look spends all alpha).
        alpha: Two-sided error rate over all looks (0.05: 95 %).
        spending: The alpha-spending function.
        equivalence: Stop as "no difference" once the interval lies inside
            +- this fraction (0.02: 2 %); None: never stop for equivalence.
        min_repeats: Launches per arm before the first look (2: the least
            that estimates the noise).
        pooled: Looks use Student's pooled-variance interval (df = n_A +
            n_B - 2) instead of Welch's (see :func:`tuner.studies.stats.pooled_interval`).
    """

    max_repeats: int
    alpha: float = 0.05
    spending: Spending = Spending.POCOCK
    equivalence: float | None = None
    min_repeats: int = 2
    pooled: bool = False

    def __post_init__(self) -> None:
        if self.min_repeats < 2:
            raise SequentialError("a look needs at least 2 repeats per arm to estimate the noise")
        if self.max_repeats < self.min_repeats:
            raise SequentialError(
                f"--max-repeats must be >= {self.min_repeats} (the first look), "
                f"got {self.max_repeats}"
            )
        if not 0.0 < self.alpha < 1.0:
            raise SequentialError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.equivalence is not None and not 0.0 < self.equivalence < 1.0:
            raise SequentialError(
                f"the equivalence margin must be a fraction in (0, 1), e.g. 0.02 for 2 %; "
                f"got {self.equivalence}"
            )

    def fraction(self, n_a: int, n_b: int) -> float:
        """Information fraction of arms with ``n_a`` and ``n_b`` repeats (1/(1/na + 1/nb) scaled)."""
        if n_a <= 0 or n_b <= 0:
            return 0.0
        info = 1.0 / (1.0 / n_a + 1.0 / n_b)
        return min(1.0, info / (self.max_repeats / 2.0))

    def levels(self, looks: Sequence[tuple[int, int]]) -> list[float]:
        """Nominal two-sided levels p_k of the looks at (n_a, n_b) repeats, in order.

        A look at or past ``max_repeats`` per arm is the last and spends the
        rest of alpha.
        """
        times: list[float] = []
        for n_a, n_b in looks:
            last = min(n_a, n_b) >= self.max_repeats
            t = 1.0 if last else self.fraction(n_a, n_b)
            if times and t <= times[-1]:
                t = min(1.0, times[-1] + 1e-6)
            times.append(t)
        rounded = tuple(round(t, 9) for t in times)
        if self.pooled:
            return list(t_levels(tuple(looks), rounded, self.alpha, self.spending))
        cs = boundaries(rounded, self.alpha, self.spending)
        return [2.0 * (1.0 - _NORMAL.cdf(c)) if math.isfinite(c) else 0.0 for c in cs]


@dataclass(frozen=True)
class Look:
    """One interim analysis.

    Attributes:
        n_a, n_b: Repeats per arm seen at this look.
        level: Nominal two-sided level this look tests at (its interval is 1 - level).
        decision: Continue, or why the A/B stops here.
        comparison: The objective's comparison at the look's confidence.
    """

    n_a: int
    n_b: int
    level: float
    decision: Decision
    comparison: Comparison | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "n_a": self.n_a,
            "n_b": self.n_b,
            "level": self.level,
            "confidence": 1.0 - self.level,
            "decision": self.decision.value,
        }


@dataclass
class SequentialMonitor:
    """Keeps the looks of one A/B and decides after each.

    Attributes:
        design: The stopping rule.
        looks: The analyses so far.
    """

    design: SequentialDesign
    looks: list[Look] = field(default_factory=list)

    def look(self, metric: str, a: Sequence[float], b: Sequence[float]) -> Look:
        """Analyse the samples so far; stop when the repeated interval decides.

        Samples must be positive (throughput, latency): the interval is on the ratio B/A.
        A call with fewer than ``min_repeats`` in an arm, or with no new
        samples since the last look, is not a look and returns CONTINUE.
        """
        n_a, n_b = len(a), len(b)
        seen = {(look.n_a, look.n_b) for look in self.looks}
        if min(n_a, n_b) < self.design.min_repeats or (n_a, n_b) in seen:
            return Look(n_a, n_b, 0.0, Decision.CONTINUE)
        history = [(look.n_a, look.n_b) for look in self.looks] + [(n_a, n_b)]
        level = self.design.levels(history)[-1]
        row = comparison_at(metric, a, b, level, pooled=self.design.pooled)
        decision = decide(row, self.design, last=min(n_a, n_b) >= self.design.max_repeats)
        out = Look(n_a, n_b, level, decision, row)
        self.looks.append(out)
        return out

    @property
    def decided(self) -> bool:
        return bool(self.looks) and self.looks[-1].decision is not Decision.CONTINUE


def comparison_at(
    metric: str,
    a: Sequence[float],
    b: Sequence[float],
    level: float,
    *,
    pooled: bool = False,
    min_rel_effect: float = 0.0,
) -> Comparison:
    """The Welch (or pooled) ratio interval at confidence ``1 - level`` (a repeated confidence interval).

    ``min_rel_effect`` is the A/B's smallest win (tuner.studies.ab_judgement):
    the looks themselves stop on any difference; the report's verdict applies it.
    """
    confidence = min(max(1.0 - level, 1e-9), 1.0 - 1e-12)
    try:
        return compare(
            metric,
            a,
            b,
            confidence=confidence,
            scale=Scale.RATIO,
            pooled=pooled,
            min_rel_effect=min_rel_effect,
        )
    except StatsError:  # a sample is not positive: the difference scale
        return compare(
            metric, a, b, confidence=confidence, pooled=pooled, min_rel_effect=min_rel_effect
        )


def decide(row: Comparison, design: SequentialDesign, *, last: bool) -> Decision:
    """Stop for a difference, for equivalence, at the last look, or continue."""
    if row.verdict is not Verdict.NO_DIFFERENCE:
        return Decision.DIFFERENT
    margin = design.equivalence
    if (
        margin is not None
        and row.rel_ci_low is not None
        and row.rel_ci_high is not None
        and row.rel_ci_low > 1.0 / (1.0 + margin) - 1.0
        and row.rel_ci_high < margin
    ):
        return Decision.EQUIVALENT
    return Decision.EXHAUSTED if last else Decision.CONTINUE
