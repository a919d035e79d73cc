"""Stored capacity probes as every face shows them: a load, a verdict, grouped by launch.

A capacity search stores each probe as a trial at its own load
(:mod:`tuner.studies.capacity_run`). Shown as an ordinary trial a probe
misleads: "= baseline" with a Δ against a baseline measured at another load,
a point on the Pareto front, a candidate baseline or winner. This module is
the one reading of stored probes: each probe's load and ✓/✗ against the SLO
the search held, and the probes of one engine launch grouped into a
:class:`CapacityStep` with the capacity that launch carried. It is computed
from the stored trials with the search's own rule (:class:`Bracket`: a load
is judged on the mean of its runs), so a search stopped in launch 2 still
shows what launch 1 carried, and a restart shows the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.studies.capacity import Bracket, By, CapacityError, Grid, launch_result
from tuner.studies.capacity_run import slo_values
from tuner.studies.slo import SLO, SLOError, parse_slo
from tuner.trials.model import Trial

MET, MISSED, UNMEASURED = "✓", "✗", "–"
# The grid's resolution when a probe stored before tunelab kept it (capacity.grid's defaults).
DEFAULT_STEP = {"concurrency": 1.0, "rate": 0.5}


def configs_only(trials: Iterable[Trial]) -> list[Trial]:
    """``trials`` without capacity probes: what baselines, deltas, fronts and winners compare."""
    return [t for t in trials if not t.is_probe]


def load_text(by: str, value: float | None) -> str:
    """``16 users`` or ``2.5 req/s``: a load as the faces write it."""
    if value is None:
        return "load ?"
    if by == "rate":
        return f"{value:g} req/s"
    return f"{value:g} user" + ("" if value == 1 else "s")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class ProbeView:
    """One stored probe: its load, and whether its run met the search's SLO.

    Attributes:
        trial: The stored probe trial.
        by: The load variable (``concurrency`` or ``rate``).
        load: The probe's load (None: not recorded, a probe never planned).
        slo: The SLO the search held (None: the stored text does not parse).
        values: The SLO keys' measured values (None: the probe was not measured
            to the end: it failed, was stopped, or lacks a key).
        measured: The benchmark ran (a failed measured probe is a miss: an
            overloaded engine); False for a probe the engine never reached.
    """

    trial: Trial
    by: By
    load: float | None
    slo: SLO | None
    values: dict[str, float] | None
    measured: bool

    @property
    def met(self) -> bool | None:
        """✓/✗ of this run (None: not measured, or no SLO to judge against)."""
        if not self.measured or self.slo is None:
            return None
        return self.values is not None and self.slo.met(self.values)

    @property
    def mark(self) -> str:
        return {True: MET, False: MISSED, None: UNMEASURED}[self.met]

    @property
    def launch(self) -> int:
        return launch_of(self.trial)

    @property
    def by_model(self) -> str:
        """``◆`` when the study model placed this probe at its boundary guess, else ""."""
        return "◆" if self.trial.tags.get("planned_by") == "model" else ""

    def figures(self) -> str:
        """``p99_ttft_ms 312 (≤ 500)``: each bound's measured value beside it."""
        if self.slo is None:
            return str(self.trial.tags.get("slo", "no SLO"))
        if self.values is None:
            return "not measured" if not self.measured else "no result (counts as a miss)"
        return ", ".join(
            f"{c.metric} {self.values.get(c.metric, float('nan')):.4g} ({c.op} {c.bound:g})"
            for c in self.slo.constraints
        )

    def line(self) -> str:
        """``capacity L1 · 16 users ✓ · p99_ttft_ms 312 (<= 500)``: the Run panel's probe line."""
        return (
            f"{step_name(self.trial)} · {load_text(self.by, self.load)}{self.by_model} {self.mark} · "
            + (self.figures())
        )

    def cell(self) -> str:
        """``probe L1 · 16 users ✓``: the results table's config cell for a probe."""
        return f"probe {step_name(self.trial)} · {load_text(self.by, self.load)}{self.by_model} {self.mark}"


def probe_view(trial: Trial) -> ProbeView | None:
    """The probe reading of ``trial`` (None: not a capacity probe)."""
    if not trial.is_probe:
        return None
    tags = trial.tags
    by: By = "rate" if tags.get("by") == "rate" else "concurrency"
    try:
        slo: SLO | None = parse_slo(str(tags.get("slo", "")))
    except SLOError:
        slo = None
    measured = "bench_s" in trial.timings
    values = slo_values(trial, slo) if slo is not None and measured else None
    return ProbeView(trial, by, _number(tags.get("value")), slo, values, measured)


def launch_of(trial: Trial) -> int:
    """The 0-based engine launch a probe ran in (its ``repeat``; 0 when not recorded)."""
    return trial.repeat if isinstance(trial.repeat, int) else 0


def step_name(trial: Trial) -> str:
    """``L1``, ``A L2``, ``max-num-seqs=64 L1``: a probe's launch, and its arm when there is one."""
    return (f"{trial.arm} " if trial.arm else "") + f"L{launch_of(trial) + 1}"


@dataclass(frozen=True)
class CapacityStep:
    """The probes of one engine launch of a capacity search, and what that launch carried.

    Attributes:
        study: The study the probes are stored under.
        arm: The arm (``A``/``B``, a swept value, ``optuna#3``; None for one config).
        launch: The launch (0-based).
        slo: The SLO text the search held.
        by: The load variable.
        probes: The launch's probes in run order.
        capacity: The largest load meeting the SLO below the smallest miss (None:
            no probe was measured; 0: not even the first load).
        failing: The smallest load that missed (None: none did).
        converged: The boundary was found (adjacent loads, or the limit met).
    """

    study: str
    arm: str | None
    launch: int
    slo: str
    by: By
    probes: tuple[ProbeView, ...]
    capacity: float | None
    failing: float | None
    converged: bool

    @property
    def name(self) -> str:
        return (f"{self.arm} " if self.arm else "") + f"L{self.launch + 1}"

    @property
    def trial_ids(self) -> tuple[str, ...]:
        return tuple(p.trial.id for p in self.probes)

    def summary(self) -> str:
        """``capacity L1 at p99_ttft_ms<=500: 12 users (16 missed) · 6 of 10 probes measured``."""
        measured = sum(1 for p in self.probes if p.measured)
        count = f"{measured} of {len(self.probes)} probes measured"
        head = f"capacity {self.name} at {self.slo}"
        if self.capacity is None:
            return f"{head}: not measured · {count}"
        text = f"{head}: {load_text(self.by, self.capacity)}"
        if self.failing is not None:
            text += f" ({load_text(self.by, self.failing)} missed)"
        if not self.converged:
            text += ", boundary not reached"
        return f"{text} · {count}"


def capacity_steps(trials: Sequence[Trial]) -> list[CapacityStep]:
    """The capacity launches among ``trials``, each with its probes and capacity, in run order."""
    groups: dict[tuple[str, str | None, int, str], list[ProbeView]] = {}
    for trial in trials:
        view = probe_view(trial)
        if view is None:
            continue
        key = (trial.study, trial.arm, view.launch, str(trial.tags.get("slo", "")))
        groups.setdefault(key, []).append(view)
    return [_step(key, views) for key, views in groups.items()]


def _step(key: tuple[str, str | None, int, str], views: list[ProbeView]) -> CapacityStep:
    study, arm, launch, slo_text = key
    first = views[0]
    judged = [v for v in views if v.measured and v.load is not None]
    grid = _grid(first, judged)
    if grid is None or first.slo is None or not judged:
        return CapacityStep(study, arm, launch, slo_text, first.by, tuple(views), None, None, False)
    bracket = Bracket(grid, first.slo)
    for view in judged:
        assert view.load is not None
        bracket.record(grid.units(view.load), view.values)
    answer = launch_result(launch, bracket, [])
    return CapacityStep(
        study,
        arm,
        launch,
        slo_text,
        first.by,
        tuple(views),
        answer.capacity,
        answer.failing,
        answer.converged,
    )


def _grid(first: ProbeView, judged: Sequence[ProbeView]) -> Grid | None:
    """The search's grid from the probes' tags (older probes: the default step, their top load)."""
    tags = first.trial.tags
    step = _number(tags.get("step")) or DEFAULT_STEP[first.by]
    loads = [v.load for v in judged if v.load is not None]
    limit = _number(tags.get("limit")) or max(loads, default=step)
    try:
        return Grid(first.by, step, step, max(limit, step))
    except CapacityError:
        return None


__all__ = [
    "CapacityStep",
    "ProbeView",
    "capacity_steps",
    "configs_only",
    "load_text",
    "probe_view",
    "step_name",
]
