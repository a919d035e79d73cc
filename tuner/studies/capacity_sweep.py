"""Capacity as a sweep objective: which value of one knob carries the most load at an SLO.

``tunelab capacity --sweep max-num-seqs=16,64,256 --slo 'p99_ttft_ms<=500'``
measures the capacity (tuner.studies.capacity_run: one engine launch, a
doubling-then-bisection search over probe trials) of every value, on
``launches`` launches each. Launches go round-robin over the values, the order
reversed every other round (16 64 256 256 64 16 ...), so slow drift of the
machine reaches every value alike, as the A/B's ABBA order does for two arms.
The best value is the one with the highest mean capacity; it is compared with
the runner-up by the same Welch interval on the capacity ratio as a capacity
A/B, so "best" is only called a win when the interval excludes zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.studies.capacity import UNIT, CapacityError, CapacityReport, Grid, LaunchCapacity
from tuner.studies.capacity_run import DEFAULT_PROBES, check_counts, run_launch
from tuner.studies.common import study_name
from tuner.studies.slo import SLO
from tuner.studies.stats import Comparison, Direction, Verdict, compare, format_relative

if TYPE_CHECKING:
    # Deferred: the executor loads the engine and benchmark stack; not at a command's start.
    from tuner.studies.executor import TrialRunner


@dataclass
class CapacityPoint:
    """One value of the swept knob and its capacity over launches."""

    key: str
    value: Any
    report: CapacityReport

    @property
    def label(self) -> str:
        return f"{self.key}={self.value}"

    @property
    def mean(self) -> float | None:
        iv = self.report.interval
        return iv.mean if iv is not None else None


@dataclass
class CapacitySweep:
    """The capacity of each value of one knob, the best one and how sure that is.

    Attributes:
        key: The swept knob.
        points: One per value, in the order given.
    """

    key: str
    points: list[CapacityPoint]

    def ranked(self) -> list[CapacityPoint]:
        """Measured points, highest mean capacity first (ties keep the given order)."""
        measured = [p for p in self.points if p.mean is not None]
        return sorted(measured, key=lambda p: -(p.mean or 0.0))

    @property
    def best(self) -> CapacityPoint | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    @property
    def runner_up(self) -> CapacityPoint | None:
        ranked = self.ranked()
        return ranked[1] if len(ranked) > 1 else None

    @property
    def comparison(self) -> Comparison | None:
        """The best against the runner-up (B = best), on the capacity per launch."""
        best, second = self.best, self.runner_up
        if best is None or second is None:
            return None
        return compare(
            "capacity",
            second.report.capacities,
            best.report.capacities,
            direction=Direction.HIGHER,
            confidence=best.report.confidence,
        )

    def summary(self) -> str:
        """``best max-num-seqs=64: 48 [44, 52] users; +31% [+18%, +45%] vs max-num-seqs=16``."""
        best = self.best
        if best is None:
            return f"capacity sweep of {self.key}: no value measured a capacity"
        text = f"best {best.label}: {best.report.summary()}"
        second, row = self.runner_up, self.comparison
        if second is None or row is None:
            return text + " (no other value measured)"
        if row.verdict is Verdict.B_BETTER:
            verdict = f"{best.label} carries significantly more"
        else:
            verdict = (
                f"not significantly more than {second.label}: the sweep does not separate "
                "them (run more --launches)"
            )
        what = UNIT[best.report.by]
        return f"{text}; {format_relative(row)} {what} vs {second.label}: {verdict} ({row.reason})"

    def to_dict(self) -> dict[str, Any]:
        row = self.comparison
        best = self.best
        return {
            "key": self.key,
            "summary": self.summary(),
            "best": None if best is None else {"value": best.value, "label": best.label},
            "comparison": row.to_dict() if row is not None else None,
            "points": [
                {"value": p.value, "label": p.label, **p.report.to_dict()} for p in self.points
            ],
        }


def launch_order(count: int, launches: int) -> list[tuple[int, int]]:
    """(value index, launch) pairs: round-robin, reversed every other round."""
    order: list[tuple[int, int]] = []
    for launch in range(launches):
        indices = range(count) if launch % 2 == 0 else range(count - 1, -1, -1)
        order += [(i, launch) for i in indices]
    return order


async def run_capacity_sweep(
    config: EngineConfig,
    key: str,
    values: Sequence[Any],
    base: Workload,
    slo: SLO,
    grid: Grid,
    runner: TrialRunner,
    *,
    launches: int = 3,
    probes: int = DEFAULT_PROBES,
    study: str | None = None,
    confidence: float = 0.95,
    on_launch: Callable[[str, LaunchCapacity], None] | None = None,
    model: bool = True,
) -> CapacitySweep:
    """The capacity of ``config`` with ``key`` at each of ``values``.

    Raises:
        CapacityError: Fewer than two values, a value twice, or bad counts.
    """
    check_counts(launches, probes)
    if len(values) < 2:
        raise CapacityError(
            f"a capacity sweep needs two or more values of {key}, got {len(values)}",
            fix=f"give --sweep {key}=V1,V2",
        )
    if len({repr(v) for v in values}) != len(values):
        raise CapacityError(f"--sweep lists a value of {key} twice", fix="give each value once")
    name = study or study_name("capacity-sweep")
    configs = [config.with_values({key: value}) for value in values]
    labels = [f"{key}={value}" for value in values]
    found: list[list[LaunchCapacity]] = [[] for _ in values]
    for index, launch in launch_order(len(values), launches):
        answer = await run_launch(
            configs[index],
            base,
            slo,
            grid,
            runner,
            study=name,
            launch=launch,
            probes=probes,
            arm=labels[index],
            model=model,
        )
        found[index].append(answer)
        if on_launch is not None:
            on_launch(labels[index], answer)
    points = [
        CapacityPoint(
            key, value, CapacityReport(name, grid.by, str(slo), grid, answers, confidence)
        )
        for value, answers in zip(values, found, strict=True)
    ]
    return CapacitySweep(key, points)
