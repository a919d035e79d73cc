"""Noise-aware comparison of two arms: means, spread, a confidence interval, a verdict.

The unit of evidence is one repeat (one engine launch + one measured run), not
one request: requests inside a run share the engine's state (batch, cache,
compilation) and are strongly correlated, so pooling them would make any two
configs look "significantly" different. With the 3–5 repeats a tuning session
can afford, the honest tool is Welch's t interval on the difference of the
arm means: it does not assume equal variances and its Welch–Satterthwaite
degrees of freedom shrink when one arm is noisy, which widens the interval.
Throughput and latency noise is multiplicative (a launch that is 10% slow is
10% slow at any speed), so when every sample is positive the interval is taken
on the logarithms and reported as a ratio B/A: on the raw scale a fast arm's
larger absolute spread would swamp the degrees of freedom, and a several-fold
gain measured twice per arm would come out "no significant difference"
(measured: 672/712 vs 4595/5356 tok/s gave [-72%, +1309%] raw and
[+281%, +1248%] on the log scale). Samples with a zero or a negative value
(failure counts) fall back to the difference of means.
A percentile bootstrap is deliberately not used: with 3–5 samples per arm it
under-covers badly (it cannot see tails it never sampled), i.e. it would
declare winners inside the noise. The Student t quantile is computed exactly
(regularized incomplete beta + bisection), not from a normal approximation,
because at 2–6 degrees of freedom the difference is large (4.30 vs 1.96).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from tuner.errors import TunelabError
from tuner.trials.tdist import t_quantile


class Direction(StrEnum):
    """Which way is better for a metric."""

    HIGHER = "higher"
    LOWER = "lower"


class Scale(StrEnum):
    """Where the interval is taken: on B/A (log samples) or on B - A (raw samples)."""

    RATIO = "ratio"
    DIFFERENCE = "difference"


class Verdict(StrEnum):
    """The three answers an A/B can give; nothing in between."""

    A_BETTER = "A better"
    B_BETTER = "B better"
    NO_DIFFERENCE = "no significant difference"


# Metrics the studies compare by default, in display order.
DEFAULT_METRICS: tuple[str, ...] = (
    "output_throughput",
    "request_throughput",
    "total_token_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
)

_HIGHER_WORDS = (
    "throughput",
    "goodput",
    "tokens_per_s",
    "tokens_per_joule",
    "completed",
    "capacity",
)
_LOWER_SUFFIXES = ("_ms", "_s", "_seconds", "_j", "_joules")
_LOWER_WORDS = ("failed", "latency", "energy", "power", "vram", "duration")


class StatsError(TunelabError, ValueError):
    """A comparison that cannot be made; the message says why."""


def metric_direction(name: str) -> Direction:
    """Whether higher or lower is better for ``name`` (vLLM bench key names).

    Throughputs, goodput and efficiency are better high; latencies (``*_ms``),
    failures, energy and memory are better low.

    Raises:
        StatsError: The name matches neither family, so guessing could flip a verdict.
    """
    low = name.lower()
    if any(word in low for word in _HIGHER_WORDS):
        return Direction.HIGHER
    if low.endswith(_LOWER_SUFFIXES) or any(word in low for word in _LOWER_WORDS):
        return Direction.LOWER
    raise StatsError(
        f"do not know whether higher or lower is better for metric {name!r}; "
        "pass its direction explicitly"
    )


# -- comparison ---------------------------------------------------------------


@dataclass(frozen=True)
class ArmStats:
    """One arm's repeats of one metric.

    Attributes:
        n: Number of repeats.
        mean: Mean over repeats.
        std: Sample standard deviation (n - 1), 0 with one repeat.
        samples: The repeats themselves, in run order.
    """

    n: int
    mean: float
    std: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> ArmStats:
        values = tuple(float(v) for v in samples)
        if not values:
            raise StatsError("an arm has no samples; run at least one repeat")
        if any(math.isnan(v) for v in values):
            raise StatsError("an arm holds NaN samples; a repeat produced no value for the metric")
        std = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(len(values), statistics.fmean(values), std, values)

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / |mean|), the run-to-run noise as a fraction."""
        return self.std / abs(self.mean) if self.mean else 0.0


@dataclass(frozen=True)
class Comparison:
    """B against A on one metric.

    Attributes:
        metric: Metric key (vLLM bench name).
        direction: Which way is better.
        a: Arm A's statistics.
        b: Arm B's statistics.
        diff: mean(B) - mean(A).
        ci_low: Lower bound of the confidence interval on diff, in the metric's
            units (on the ratio scale: A's geometric mean times the ratio bound - 1).
        ci_high: Upper bound of it.
        rel_diff: The change of B relative to A: geometric-mean ratio - 1 on the
            ratio scale, diff / |mean(A)| on the difference scale (None when A's mean is 0).
        rel_ci_low: Lower bound of the change, as a fraction.
        rel_ci_high: Upper bound of it.
        df: Welch–Satterthwaite degrees of freedom (None when not estimable).
        scale: Whether the interval was taken on B/A or on B - A.
        confidence: Two-sided confidence level, e.g. 0.95.
        verdict: A better, B better, or no significant difference.
        reason: Why the verdict is what it is, in words.
        one_piece: The arms (``"A"``, ``"B"``) whose responses mostly arrived
            in one piece, on a TPOT/ITL row: their figures measured a starved
            server, not streaming, so the row's verdict is withheld.
    """

    metric: str
    direction: Direction
    a: ArmStats
    b: ArmStats
    diff: float
    ci_low: float
    ci_high: float
    rel_diff: float | None
    rel_ci_low: float | None
    rel_ci_high: float | None
    df: float | None
    confidence: float
    verdict: Verdict
    reason: str
    scale: Scale = Scale.DIFFERENCE
    one_piece: tuple[str, ...] = ()

    @property
    def withheld(self) -> str | None:
        """Why no verdict may be drawn from this row (``"A in one piece"``), else None."""
        return f"{' and '.join(self.one_piece)} in one piece" if self.one_piece else None

    @property
    def shown_verdict(self) -> str:
        """The verdict as every face prints it: ``no verdict`` when it is withheld."""
        return "no verdict" if self.withheld else self.verdict.value

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["direction"] = self.direction.value
        data["verdict"] = self.verdict.value
        data["scale"] = self.scale.value
        data["one_piece"] = list(self.one_piece)
        data["withheld"] = self.withheld
        for key in ("ci_low", "ci_high", "rel_ci_low", "rel_ci_high"):
            if data[key] is not None and math.isinf(data[key]):
                data[key] = None
        return data


def welch_interval(
    a: ArmStats, b: ArmStats, confidence: float = 0.95
) -> tuple[float, float, float | None]:
    """Welch's t interval for mean(B) - mean(A): (low, high, df).

    With fewer than two repeats in either arm the variance is unknown and the
    interval is (-inf, inf): no claim can be made.
    """
    diff = b.mean - a.mean
    if a.n < 2 or b.n < 2:
        return -math.inf, math.inf, None
    va, vb = a.std**2 / a.n, b.std**2 / b.n
    se2 = va + vb
    if se2 == 0.0:
        return diff, diff, None
    df = se2**2 / ((va**2 / (a.n - 1) if va else 0.0) + (vb**2 / (b.n - 1) if vb else 0.0))
    t = t_quantile(0.5 + confidence / 2.0, df)
    half = t * math.sqrt(se2)
    return diff - half, diff + half, df


def pooled_interval(
    a: ArmStats, b: ArmStats, confidence: float = 0.95
) -> tuple[float, float, float | None]:
    """Student's pooled-variance t interval for mean(B) - mean(A): (low, high, df).

    Assumes both arms share one noise level (two configs of one engine on one
    node); with equal repeats per arm it keeps its level even when they do
    not (the t test is robust to unequal variances at equal n). Its
    df = n_A + n_B - 2 is 2 at 2 repeats per arm, where Welch's is 1 to 2 —
    at so few repeats the difference between t(1) = 12.7 and t(2) = 4.3 is
    the difference between stopping and not.
    """
    diff = b.mean - a.mean
    if a.n < 2 or b.n < 2:
        return -math.inf, math.inf, None
    df = a.n + b.n - 2
    pooled = ((a.n - 1) * a.std**2 + (b.n - 1) * b.std**2) / df
    se = math.sqrt(pooled * (1.0 / a.n + 1.0 / b.n))
    if se == 0.0:
        return diff, diff, None
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return diff - half, diff + half, float(df)


def compare(
    metric: str,
    a_samples: Sequence[float],
    b_samples: Sequence[float],
    *,
    direction: Direction | None = None,
    confidence: float = 0.95,
    min_rel_effect: float = 0.0,
    scale: Scale | None = None,
    pooled: bool = False,
) -> Comparison:
    """Compare B against A on one metric and give a verdict that respects the noise.

    A winner is declared only when the whole confidence interval lies on one
    side of "no change" *and* (if ``min_rel_effect`` > 0) the interval's bound
    nearest to no change is at least that large a fraction of A — so a real but
    negligible difference is not sold as a win.

    Args:
        metric: Metric key; its direction is inferred unless given.
        a_samples: Arm A's value per repeat.
        b_samples: Arm B's value per repeat.
        direction: Override for metrics whose direction cannot be inferred.
        confidence: Two-sided confidence level in (0, 1).
        min_rel_effect: Smallest relative difference worth calling a win.
        scale: Force the ratio or the difference scale; by default the ratio
            when every sample is positive, else the difference.
        pooled: Student's pooled-variance interval instead of Welch's
            (:func:`pooled_interval`; the sequential A/B's ``pooled`` design).

    Raises:
        StatsError: Empty arms, NaN samples, a bad confidence level, an unknown
            direction, or the ratio scale forced on samples that are not all positive.
    """
    if not 0.0 < confidence < 1.0:
        raise StatsError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence}")
    way = direction or metric_direction(metric)
    a, b = ArmStats.of(a_samples), ArmStats.of(b_samples)
    positive = all(v > 0 for v in (*a.samples, *b.samples))
    if scale is Scale.RATIO and not positive:
        raise StatsError(
            f"metric {metric!r} has a zero or negative sample, so B/A is undefined; "
            "compare it on the difference scale"
        )
    used = scale or (Scale.RATIO if positive else Scale.DIFFERENCE)
    interval = pooled_interval if pooled else welch_interval
    if used is Scale.RATIO:
        span = _ratio_interval(a, b, confidence, interval)
    else:
        span = _difference_interval(a, b, confidence, interval)
    verdict, reason = _verdict(a, b, span, way, confidence, min_rel_effect)
    return Comparison(
        metric=metric,
        direction=way,
        a=a,
        b=b,
        diff=b.mean - a.mean,
        ci_low=span.abs_low,
        ci_high=span.abs_high,
        rel_diff=span.rel,
        rel_ci_low=span.rel_low,
        rel_ci_high=span.rel_high,
        df=span.df,
        confidence=confidence,
        verdict=verdict,
        reason=reason,
        scale=used,
    )


@dataclass(frozen=True)
class _Interval:
    """Welch's interval on one scale, in the units the verdict and the report need.

    ``low``/``high`` are on the tested scale (log ratio or difference), so
    "no change" is 0 on both; the ``rel_*`` and ``abs_*`` forms are what the
    report prints. ``whole``/``zero`` name the scale in the verdict's reason.
    """

    low: float
    high: float
    df: float | None
    rel: float | None
    rel_low: float | None
    rel_high: float | None
    abs_low: float
    abs_high: float
    whole: str
    zero: str


_IntervalFn = Callable[[ArmStats, ArmStats, float], tuple[float, float, float | None]]


def _ratio_interval(
    a: ArmStats, b: ArmStats, confidence: float, interval: _IntervalFn
) -> _Interval:
    """Welch (or pooled) on the logs: the interval of log(B/A), centred on the geometric-mean ratio."""
    a_log = ArmStats.of([math.log(v) for v in a.samples])
    b_log = ArmStats.of([math.log(v) for v in b.samples])
    low, high, df = interval(a_log, b_log, confidence)
    base = math.exp(a_log.mean)
    known = math.isfinite(low) and math.isfinite(high)
    rel_low = math.exp(low) - 1.0 if known else None
    rel_high = math.exp(high) - 1.0 if known else None
    return _Interval(
        low,
        high,
        df,
        math.exp(b_log.mean - a_log.mean) - 1.0,
        rel_low,
        rel_high,
        base * rel_low if rel_low is not None else -math.inf,
        base * rel_high if rel_high is not None else math.inf,
        "change B/A",
        "0%",
    )


def _difference_interval(
    a: ArmStats, b: ArmStats, confidence: float, interval: _IntervalFn
) -> _Interval:
    """Welch (or pooled) on the raw values: the interval of B - A (relative to |mean A|)."""
    low, high, df = interval(a, b, confidence)
    scale_a = abs(a.mean)
    return _Interval(
        low,
        high,
        df,
        ((b.mean - a.mean) / scale_a) if scale_a else None,
        (low / scale_a) if scale_a else None,
        (high / scale_a) if scale_a else None,
        low,
        high,
        "difference",
        "0",
    )


def _verdict(
    a: ArmStats,
    b: ArmStats,
    span: _Interval,
    way: Direction,
    confidence: float,
    min_rel_effect: float,
) -> tuple[Verdict, str]:
    """The verdict and its reason: a win only when the interval excludes no change by enough."""
    if a.n < 2 or b.n < 2:
        return Verdict.NO_DIFFERENCE, "needs at least 2 repeats per arm to estimate the noise"
    if span.low <= 0.0 <= span.high:
        return (
            Verdict.NO_DIFFERENCE,
            f"the {confidence:.0%} interval of the {span.whole} contains {span.zero}",
        )
    nearest = None
    if span.rel_low is not None and span.rel_high is not None:
        nearest = min(abs(span.rel_low), abs(span.rel_high))
    if min_rel_effect > 0 and (nearest is None or nearest < min_rel_effect):
        return Verdict.NO_DIFFERENCE, (
            f"the difference is real but may be below the {min_rel_effect:.1%} that counts as a win"
        )
    b_wins = (span.low > 0.0) == (way is Direction.HIGHER)
    return (
        Verdict.B_BETTER if b_wins else Verdict.A_BETTER,
        f"the {confidence:.0%} interval of the {span.whole} excludes {span.zero}",
    )


def format_relative(c: Comparison) -> str:
    """'+12.3% [+8.1%, +16.5%]' style text of B relative to A."""
    if c.rel_diff is None:
        return f"{c.diff:+.4g} (A's mean is 0)"
    if c.rel_ci_low is None or c.rel_ci_high is None or math.isinf(c.ci_low):
        return f"{_pct(c.rel_diff)} [interval unknown]"
    return f"{_pct(c.rel_diff)} [{_pct(c.rel_ci_low)}, {_pct(c.rel_ci_high)}]"


def _pct(x: float) -> str:
    """A signed percentage: one decimal below ±1000 %, none above (a tenth of a percent of a
    79-fold change says nothing, and the digits pushed the verdict off an 80-column row)."""
    return f"{x:+.1%}" if abs(x) < 10 else f"{x:+.0%}"
