"""Preset re-verification: is this preset still as fast here, after an upgrade, as when it was exported?

A preset exported from a trial carries what was measured: ``[workload]``,
``[results]`` (the objective and its value) and, when the config was run
more than once, ``[results.noise]`` (repeats, mean, standard deviation).
``tunelab presets verify`` re-runs that workload on this node and vLLM, a few
full engine launches, and compares the fresh launches with the stored figures
the way an A/B compares two arms (Welch's t interval, :mod:`tuner.studies.stats`),
with the stored arm known only by its summary (n, mean, sd). A significant
regression — the whole interval on the worse side and at least ``tolerance``
away from no change — fails the check, so it can gate an upgrade or CI on the
GPU node. A preset without ``[results.noise]`` is compared as if its figure
were exact, which makes the check stricter; the report says so.

The interval is taken on now/stored, as an A/B takes it on B/A (noise is
multiplicative): the stored arm's log-scale mean and sd come from the
log-normal with its stored mean and sd. A zero or negative value falls back to
the difference of means, relative to the stored mean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.errors import EXIT_RUN_FAILED, TunelabError
from tuner.studies.common import study_name, value_of
from tuner.studies.stats import ArmStats, Direction, metric_direction, welch_interval
from tuner.trials.model import Trial
from tuner.trials.tdist import t_quantile

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.executor import TrialRunner

EXIT_REGRESSION = EXIT_RUN_FAILED
PASSED = "pass"
REGRESSION = "regression"
IMPROVED = "improved"
NOT_MEASURED = "not measured"


class VerifyError(TunelabError, ValueError):
    """A preset that cannot be re-verified (nothing measured to compare with)."""


@dataclass(frozen=True)
class Reference:
    """The stored figure a preset is verified against.

    Attributes:
        objective: The result key (vLLM bench name).
        n: Repeats behind the figure (1: a single run, no noise stored).
        mean: The stored mean (or the single value).
        std: Sample standard deviation over the repeats (None: unknown).
    """

    objective: str
    n: int
    mean: float
    std: float | None

    @property
    def has_noise(self) -> bool:
        return self.n >= 2 and self.std is not None


def _number(table: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = table.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def reference_of(results: Mapping[str, Any] | None) -> Reference:
    """The stored objective and its noise from a preset's ``[results]``.

    Reads ``[results.noise]`` under its current names (repeats, mean, stdev)
    and AIPerf's (n or count, std, se).

    Raises:
        VerifyError: No ``[results]``, no objective, or no value for it.
    """
    fix = "export the preset from a finished trial (`tunelab export TRIAL`): it then carries them"
    if not results:
        raise VerifyError("the preset has no [results] to verify against", fix=fix)
    objective = results.get("objective")
    if not isinstance(objective, str) or not objective:
        raise VerifyError("the preset's [results] names no objective", fix=fix)
    noise = results.get("noise")
    if isinstance(noise, Mapping) and noise.get("objective", objective) == objective:
        n = _number(noise, "repeats", "n", "count")
        ids = noise.get("trial_ids")
        if n is None and isinstance(ids, list):
            n = float(len(ids))
        mean = _number(noise, "mean")
        std = _number(noise, "stdev", "std")
        se = _number(noise, "se")
        if std is None and se is not None and n:
            std = se * math.sqrt(n)
        if n is not None and n >= 2 and mean is not None and std is not None:
            return Reference(objective, int(n), mean, std)
    value = _number(results, "objective_value", objective)
    if value is None:
        raise VerifyError(f"the preset's [results] has no value for {objective}", fix=fix)
    return Reference(objective, 1, value, None)


@dataclass(frozen=True)
class Judgement:
    """The fresh runs against the reference.

    Attributes:
        verdict: pass, regression, improved or not measured.
        rel: mean(fresh) / stored mean - 1.
        rel_low, rel_high: Its confidence interval (None: not estimable).
        reason: Why, in words.
    """

    verdict: str
    rel: float | None
    rel_low: float | None
    rel_high: float | None
    reason: str


def _log_interval(
    ref: Reference, fresh: ArmStats, confidence: float
) -> tuple[float, float, float, str]:
    """(B/A - 1, its low and high bounds, how) on the log scale.

    Noise is multiplicative (tuner.studies.stats), so the interval is taken on
    log(fresh / stored), as an A/B takes it on B/A. The stored arm has only its
    mean and sd, so its log-scale mean and sd come from the log-normal with
    those moments (sigma^2 = ln(1 + cv^2), mu = ln(mean) - sigma^2 / 2).
    """
    logs = ArmStats.of([math.log(v) for v in fresh.samples])
    if ref.has_noise:
        sigma2 = math.log1p((float(ref.std or 0.0) / ref.mean) ** 2)
        old = ArmStats(ref.n, math.log(ref.mean) - sigma2 / 2, math.sqrt(sigma2), ())
        low, high, _ = welch_interval(old, logs, confidence)
        how = f"Welch {confidence:.0%} interval on now/stored against the stored {ref.n} repeats"
    else:
        old = ArmStats(1, math.log(ref.mean), 0.0, ())
        half = t_quantile(0.5 + confidence / 2, logs.n - 1) * logs.std / math.sqrt(logs.n)
        low, high = logs.mean - old.mean - half, logs.mean - old.mean + half
        how = (
            f"{confidence:.0%} interval on now/stored; the preset has no [results.noise], "
            "its figure taken as exact"
        )
    rel = math.exp(logs.mean - old.mean) - 1.0
    return rel, math.expm1(low), math.expm1(high), how


def _difference_interval(
    ref: Reference, fresh: ArmStats, confidence: float
) -> tuple[float, float, float, str]:
    """The same on the difference of means, relative to |stored| (a zero or negative value)."""
    if ref.has_noise:
        old = ArmStats(ref.n, ref.mean, float(ref.std or 0.0), ())
        low, high, _ = welch_interval(old, fresh, confidence)
        how = f"Welch {confidence:.0%} interval against the stored {ref.n} repeats"
    else:
        half = t_quantile(0.5 + confidence / 2, fresh.n - 1) * fresh.std / math.sqrt(fresh.n)
        low, high = fresh.mean - ref.mean - half, fresh.mean - ref.mean + half
        how = f"{confidence:.0%} interval; the preset has no [results.noise], its figure taken as exact"
    scale = abs(ref.mean)
    return (fresh.mean - ref.mean) / scale, low / scale, high / scale, how


def judge(
    ref: Reference,
    fresh: Sequence[float],
    *,
    direction: Direction | None = None,
    confidence: float = 0.95,
    tolerance: float = 0.0,
) -> Judgement:
    """Regression, improvement or pass: Welch's interval of the fresh runs against the stored figure.

    On now/stored when every value is positive (as an A/B's B/A), else on the
    difference. Without stored noise the stored figure is taken as exact (a
    one-sample t interval of the fresh runs): stricter, and said in the reason.
    """
    if not fresh:
        return Judgement(NOT_MEASURED, None, None, None, "no fresh run finished")
    if not ref.mean:
        return Judgement(PASSED, None, None, None, "the stored value is 0: no relative change")
    way = direction or metric_direction(ref.objective)
    new = ArmStats.of(fresh)
    if new.n < 2:
        rel = (new.mean - ref.mean) / abs(ref.mean)
        return Judgement(PASSED, rel, None, None, "one fresh run: no interval, no claim")
    positive = ref.mean > 0 and all(v > 0 for v in new.samples)
    pick = _log_interval if positive else _difference_interval
    rel, rel_low, rel_high, how = pick(ref, new, confidence)
    # On the "better is positive" axis a regression lies wholly below 0.
    gain_low, gain_high = (rel_low, rel_high) if way is Direction.HIGHER else (-rel_high, -rel_low)
    if gain_high < 0 and -gain_high >= tolerance:
        return Judgement(REGRESSION, rel, rel_low, rel_high, f"{how} lies on the worse side")
    if gain_high < 0:
        reason = f"{how}: worse, but by less than the {tolerance:.0%} tolerance"
        return Judgement(PASSED, rel, rel_low, rel_high, reason)
    if gain_low > 0:
        return Judgement(IMPROVED, rel, rel_low, rel_high, f"{how} lies on the better side")
    return Judgement(PASSED, rel, rel_low, rel_high, f"{how} contains no change")


@dataclass
class VerifyReport:
    """The outcome of ``presets verify``.

    Attributes:
        preset: The preset's name.
        study: The study the fresh trials are stored under.
        reference: The stored figure.
        fresh: The fresh runs' objective values.
        judgement: The verdict with its interval.
        trials: The fresh trials' ids.
        failures: ``repeat: reason`` for fresh runs that did not finish.
        environment: What differs between the preset's recorded environment and now.
        tolerance, confidence: The check's settings.
    """

    preset: str
    study: str
    reference: Reference
    fresh: list[float]
    judgement: Judgement
    trials: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)
    tolerance: float = 0.0
    confidence: float = 0.95

    @property
    def failed(self) -> bool:
        """Whether the check fails (a regression, or nothing measured)."""
        return self.judgement.verdict in (REGRESSION, NOT_MEASURED)

    def summary(self) -> str:
        j = self.judgement
        ref = self.reference
        stored = f"stored {ref.mean:.4g}" + (f" (n={ref.n})" if ref.n > 1 else "")
        if j.verdict == NOT_MEASURED:
            return f"{j.verdict}: {ref.objective} {stored}; {j.reason}"
        now = f"now {statistics.fmean(self.fresh):.4g} (n={len(self.fresh)})"
        change = f"{j.rel:+.1%}" if j.rel is not None else "?"
        if j.rel_low is not None and j.rel_high is not None:
            change += f" [{j.rel_low:+.1%}, {j.rel_high:+.1%}]"
        return f"{j.verdict}: {ref.objective} {stored}, {now}: {change}; {j.reason}"

    def to_dict(self) -> dict[str, Any]:
        j = self.judgement
        return {
            "preset": self.preset,
            "study": self.study,
            "verdict": j.verdict,
            "failed": self.failed,
            "summary": self.summary(),
            "objective": self.reference.objective,
            "stored": {
                "n": self.reference.n,
                "mean": self.reference.mean,
                "std": self.reference.std,
            },
            "fresh": self.fresh,
            "rel": j.rel,
            "rel_ci_low": j.rel_low,
            "rel_ci_high": j.rel_high,
            "confidence_level": self.confidence,
            "tolerance": self.tolerance,
            "trials": self.trials,
            "failures": self.failures,
            "environment": self.environment,
        }


async def run_verify(
    name: str,
    config: EngineConfig,
    workload: Workload,
    reference: Reference,
    runner: TrialRunner,
    *,
    repeats: int = 3,
    confidence: float = 0.95,
    tolerance: float = 0.0,
    study: str | None = None,
    environment: Sequence[str] = (),
    on_trial: Callable[[Trial], None] | None = None,
) -> VerifyReport:
    """Re-run ``workload`` on ``config`` ``repeats`` times (full launches) and judge against ``reference``.

    Raises:
        VerifyError: Fewer than 2 repeats (no interval could be formed).
    """
    if repeats < 2:
        raise VerifyError(f"repeats must be >= 2 for an interval, got {repeats}", fix="--repeats 3")
    label = study or study_name("verify")
    trials = [
        Trial(
            config=config,
            workload=workload,
            study=label,
            objective=reference.objective,
            arm="B",
            repeat=i,
            tags={"kind": "verify", "preset": name},
        )
        for i in range(repeats)
    ]
    done = await runner.all(trials, on_done=on_trial)
    fresh = [v for t in done if (v := value_of(t, reference.objective)) is not None]
    failures = [
        f"{t.repeat}: {t.status} ({t.failure_reason or 'no reason recorded'})"
        for t in done
        if value_of(t, reference.objective) is None
    ]
    judgement = judge(reference, fresh, confidence=confidence, tolerance=tolerance)
    return VerifyReport(
        preset=name,
        study=label,
        reference=reference,
        fresh=fresh,
        judgement=judgement,
        trials=[t.id for t in done],
        failures=failures,
        environment=list(environment),
        tolerance=tolerance,
        confidence=confidence,
    )
