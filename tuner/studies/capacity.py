"""Capacity under an SLO: the largest load a config carries while the SLO holds.

"How many users does this config carry while p99 TTFT stays under 500 ms?" is
the question production owners ask; a plain run answers "how fast at this
load?". The search follows vLLM's ``vllm bench sweep serve_sla``
(vllm/benchmarks/sweep/serve_sla.py, ``_estimate_sla_bounds`` then
``_find_sla_value``): double the load while the SLO is met, then bisect
between the largest passing and the smallest failing load until they are one
step apart; a load is judged on the mean of its runs. Two differences, both
for a cheaper engine: the search starts at ``start`` (vLLM first measures at
an "infinite" 65536 to guess a start, which on a small engine means thousands
of requests in flight), and a launch has a fixed probe budget — once the
boundary is found, the probes left re-measure its two sides (vLLM's
``--num-runs``, spent where it decides the answer), so a lucky run at the
boundary does not set the capacity alone.

One launch gives one capacity; the engine's launch-to-launch noise (memory
layout, compilation, the machine's other load) moves it, so a capacity study
repeats the search on N launches and reports the mean with a Student t
interval over launches: "max concurrency meeting the SLO: 48 [44, 52]".

Running the probes on one engine is :mod:`tuner.studies.capacity_run`; this
module is the pure part (search state, per-launch answer, the report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tuner.errors import TunelabError
from tuner.studies.slo import SLO
from tuner.studies.stats import (
    Comparison,
    Direction,
    Verdict,
    compare,
    format_relative,
)
from tuner.trials.noise import RepeatNoise

By = Literal["concurrency", "rate"]
BY_CHOICES: tuple[By, ...] = ("concurrency", "rate")
UNIT = {"concurrency": "concurrency", "rate": "request rate"}


class CapacityError(TunelabError, ValueError):
    """A capacity search that cannot run as asked; the fix says what to change."""


@dataclass(frozen=True)
class Grid:
    """The loads a search may try: ``step`` x k for k = 1 .. ``limit`` / ``step``.

    Attributes:
        by: The load variable: concurrency (users) or request rate (requests/s).
        step: Resolution of the answer (1 user; a fraction of a request/s).
        start: The first load tried (a multiple of ``step``).
        limit: The largest load tried; meeting the SLO there means "at least this".
    """

    by: By
    step: float
    start: float
    limit: float

    def __post_init__(self) -> None:
        if self.by not in BY_CHOICES:
            raise CapacityError(f"--by must be concurrency or rate, not {self.by!r}")
        if not (self.step > 0 and math.isfinite(self.step)):
            raise CapacityError(f"the step must be a number > 0, got {self.step}")
        if self.by == "concurrency" and self.step != int(self.step):
            raise CapacityError("concurrency moves in whole users", fix="use a whole --step")
        if not self.step <= self.start <= self.limit < math.inf:
            raise CapacityError(
                f"need step <= start <= limit, got step {self.step:g}, start {self.start:g}, "
                f"limit {self.limit:g}",
                fix="raise --max or lower --start",
            )

    def units(self, value: float) -> int:
        return round(value / self.step)

    def value(self, units: int) -> float:
        v = units * self.step
        return float(int(v)) if self.by == "concurrency" else round(v, 9)


@dataclass
class Bracket:
    """The search state of one launch: the runs per load and what to try next.

    Loads are kept as grid units (ints) so that bisection ends exactly. A run
    is the SLO keys' values, or None for a trial that failed (too many failed
    requests, a benchmark error): an overloaded engine, so that load misses.
    """

    grid: Grid
    slo: SLO
    runs: dict[int, list[dict[str, float] | None]] = field(default_factory=dict)

    def verdict(self, units: int) -> bool:
        """Whether a load meets the SLO: on the mean of its runs, as vLLM judges --num-runs."""
        results = self.runs[units]
        if any(r is None for r in results):
            return False
        return self.slo.met_by_mean([r for r in results if r is not None])

    def bounds(self) -> tuple[int, int | None]:
        """(largest passing below the smallest failing, smallest failing); 0 = nothing passed."""
        failing = [u for u in self.runs if not self.verdict(u)]
        hi = min(failing) if failing else None
        passing = [u for u in self.runs if self.verdict(u) and (hi is None or u < hi)]
        return (max(passing) if passing else 0), hi

    @property
    def converged(self) -> bool:
        """The boundary is found: adjacent loads, or the limit itself passes."""
        lo, hi = self.bounds()
        if hi is None:
            return lo >= self.grid.units(self.grid.limit)
        return hi - lo <= 1

    def next_units(self, guess: int | None = None) -> int:
        """The load to measure next (grid units); re-measures the boundary once converged.

        Doubling from the start while the SLO holds, then bisection (a failing
        start bisects down towards one step). ``guess``: a load a model expects at the
        boundary (tuner.studies.capacity_model), measured instead when it lies strictly
        inside the bracket and has not been measured.
        """
        lo, hi = self.bounds()
        top = self.grid.units(self.grid.limit)
        if not self.runs:
            return self.grid.units(self.grid.start)
        if self.usable_guess(guess):
            assert guess is not None
            return guess
        if not self.converged:
            return min(top, lo * 2) if hi is None else (lo + hi) // 2
        # Converged: the side with fewer runs (the passing side on a tie) gets another.
        sides = [u for u in (lo, hi) if u is not None and u in self.runs]
        return min(sides, key=lambda u: (len(self.runs[u]), u != lo))

    def usable_guess(self, guess: int | None) -> bool:
        """Whether ``next_units`` would measure ``guess``: unconverged, inside the bracket."""
        if guess is None or self.converged or guess in self.runs:
            return False
        lo, hi = self.bounds()
        top = self.grid.units(self.grid.limit)
        return lo < guess <= top and (hi is None or guess < hi)

    def record(self, units: int, values: dict[str, float] | None) -> None:
        self.runs.setdefault(units, []).append(values)


@dataclass(frozen=True)
class Probe:
    """One measured load of a launch.

    Attributes:
        value: The load (users or requests/s).
        met: Whether this run met the SLO (a failed trial did not).
        trial_id: The stored trial.
        margin: The worst relative violation (<= 0: met; None: no results).
        values: The SLO keys' measured values.
        by_model: The study model placed it (tuner.studies.capacity_model), not the
            doubling or bisection.
    """

    value: float
    met: bool
    trial_id: str
    margin: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    by_model: bool = False


@dataclass
class LaunchCapacity:
    """What one engine launch carried.

    Attributes:
        launch: Index of the launch (0-based).
        capacity: The largest load meeting the SLO (0: not even the start).
        failing: The smallest load that missed it (None: none did up to the limit).
        converged: Whether the boundary was found within the probe budget.
        capped: The limit itself met the SLO (the capacity is at least it).
        probes: The probes in run order.
        failure: Why the launch measured nothing (engine did not start, crashed...).
        to_converge: Probes measured when the boundary was first bracketed (None: never);
            the rest re-measured its two sides.
    """

    launch: int
    capacity: float
    failing: float | None
    converged: bool
    capped: bool = False
    probes: list[Probe] = field(default_factory=list)
    failure: str | None = None
    to_converge: int | None = None

    @property
    def measured(self) -> bool:
        return self.failure is None and bool(self.probes)

    @property
    def guided(self) -> int:
        """Probes the study model placed."""
        return sum(p.by_model for p in self.probes)

    def probes_text(self) -> str:
        """``1, 2, 4, 24◆, 25◆✗``: the loads in run order (✗ missed, ◆ placed by the model)."""
        return ", ".join(
            f"{p.value:g}{'◆' if p.by_model else ''}{'' if p.met else '✗'}" for p in self.probes
        )

    def search_text(self) -> str:
        """How the boundary was found: probes to bracket it, and how many the model placed."""
        if self.to_converge is None:
            return "not bracketed within the probe budget"
        said = f"bracketed after {self.to_converge} probe(s)"
        if self.guided:
            said += f", {self.guided} placed by the study model (◆)"
        return said

    def to_dict(self) -> dict[str, Any]:
        return {
            "launch": self.launch,
            "capacity": self.capacity,
            "failing": self.failing,
            "converged": self.converged,
            "capped": self.capped,
            "failure": self.failure,
            "to_converge": self.to_converge,
            "guided": self.guided,
            "probes": [
                {
                    "value": p.value,
                    "met": p.met,
                    "trial": p.trial_id,
                    "margin": p.margin,
                    "values": p.values,
                    "by_model": p.by_model,
                }
                for p in self.probes
            ],
        }


def launch_result(launch: int, bracket: Bracket, probes: list[Probe]) -> LaunchCapacity:
    """The launch's answer from its search state."""
    lo, hi = bracket.bounds()
    grid = bracket.grid
    capped = hi is None and lo >= grid.units(grid.limit)
    return LaunchCapacity(
        launch=launch,
        capacity=grid.value(lo),
        failing=grid.value(hi) if hi is not None else None,
        converged=bracket.converged,
        capped=capped,
        probes=probes,
    )


@dataclass(frozen=True)
class Interval:
    """Mean capacity over launches with its Student t interval.

    Attributes:
        n: Launches that measured something.
        mean: Mean capacity.
        low, high: The interval (equal to the mean with one launch, None: not estimable).
        confidence: Two-sided level.
    """

    n: int
    mean: float
    low: float | None
    high: float | None
    confidence: float


def interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Mean and t interval over launches (no interval from one launch: there is no spread)."""
    if not values:
        raise CapacityError("no launch measured a capacity")
    noise = RepeatNoise.of(values, confidence)
    if noise is None:
        return Interval(len(values), float(values[0]), None, None, confidence)
    return Interval(noise.n, noise.mean, max(0.0, noise.ci_low), noise.ci_high, confidence)


def _fmt(by: By, value: float) -> str:
    return f"{value:.0f}" if by == "concurrency" else f"{value:.2f}".rstrip("0").rstrip(".")


@dataclass
class CapacityReport:
    """The capacity study: per-launch answers and the interval over them.

    Attributes:
        study: Study name the probe trials are stored under.
        by: The load variable.
        slo: The SLO in vLLM's spelling.
        grid: The loads the search could try.
        launches: One answer per engine launch.
        confidence: Level of the interval.
    """

    study: str
    by: By
    slo: str
    grid: Grid
    launches: list[LaunchCapacity]
    confidence: float = 0.95

    @property
    def capacities(self) -> list[float]:
        return [launch.capacity for launch in self.launches if launch.measured]

    @property
    def interval(self) -> Interval | None:
        values = self.capacities
        return interval(values, self.confidence) if values else None

    def summary(self) -> str:
        """``max concurrency meeting the SLO: 48 [44, 52]`` plus what the figure rests on."""
        what = f"max {UNIT[self.by]} meeting {self.slo}"
        iv = self.interval
        if iv is None:
            reasons = "; ".join(sorted({lc.failure or "no probe" for lc in self.launches}))
            return f"{what}: not measured ({reasons})"
        each = ", ".join(_fmt(self.by, v) for v in self.capacities)
        text = f"{what}: {_fmt(self.by, iv.mean)}"
        if iv.low is not None and iv.high is not None:
            text += f" [{_fmt(self.by, iv.low)}, {_fmt(self.by, iv.high)}]"
            text += f" ({iv.confidence:.0%} interval over {iv.n} launches: {each})"
        else:
            text += " (1 launch, no interval: run --launches 3 for one)"
        if any(lc.capped for lc in self.launches):
            text += f"; the limit {_fmt(self.by, self.grid.limit)} met the SLO: raise --max"
        if any(lc.measured and lc.capacity == 0 for lc in self.launches):
            text += f"; even {_fmt(self.by, self.grid.step)} missed it"
        if any(lc.measured and not lc.converged for lc in self.launches):
            text += "; a launch ran out of probes before the boundary: raise --probes"
        return text

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {
            "study": self.study,
            "by": self.by,
            "slo": self.slo,
            "step": self.grid.step,
            "start": self.grid.start,
            "limit": self.grid.limit,
            "summary": self.summary(),
            "capacity": None
            if iv is None
            else {
                "n": iv.n,
                "mean": iv.mean,
                "ci_low": iv.low,
                "ci_high": iv.high,
                "confidence_level": iv.confidence,
            },
            "launches": [launch.to_dict() for launch in self.launches],
        }


@dataclass
class CapacityAB:
    """Capacity as an A/B objective: two configs' capacities over launches, compared.

    Attributes:
        a, b: Each arm's capacity study (same SLO, grid and study name).
    """

    a: CapacityReport
    b: CapacityReport

    @property
    def comparison(self) -> Comparison | None:
        """B against A on the capacity per launch (None until both arms measured one)."""
        a, b = self.a.capacities, self.b.capacities
        if not a or not b:
            return None
        return compare("capacity", a, b, direction=Direction.HIGHER, confidence=self.a.confidence)

    def summary(self) -> str:
        """``B carries +31% [+18%, +45%] more concurrency at ...: B better`` and both arms."""
        row = self.comparison
        what = UNIT[self.a.by]
        if row is None:
            return f"capacity A/B at {self.a.slo}: an arm measured nothing"
        verdict = {
            Verdict.B_BETTER: "B better",
            Verdict.A_BETTER: "A better",
            Verdict.NO_DIFFERENCE: "no significant difference",
        }[row.verdict]
        return (
            f"B carries {format_relative(row)} {what} vs A at {self.a.slo}: {verdict} "
            f"({row.reason}); A: {self.a.summary()}; B: {self.b.summary()}"
        )

    def to_dict(self) -> dict[str, Any]:
        row = self.comparison
        return {
            "summary": self.summary(),
            "comparison": row.to_dict() if row is not None else None,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
        }
