"""Study plans as data: what a study runs, built by either face, checked once, stored with it.

A plan holds everything that decides a study's trials and its verdict: the
configs, the workload, the design (repeats, order, confidence, smallest win,
SLO, grid...) and the study name. ``tunelab ab``/``sweep``/``tune``/
``capacity``/``ablate``/``presets verify`` and the TUI's jobs build one and
hand it to :func:`tuner.lab.execute.execute`, the only way a face runs a
study; the plan is written into the store beside the study's trials
(:func:`tuner.lab.execute.stored_plan`), so the design a study ran with is
read back, not remembered by whichever face asks.

A plan is checked when it is built (``__post_init__``): a design no study
could run raises :class:`PlanError` (message + fix, exit 2) before any engine
starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeVar

from tuner.bench.datasets import check_dataset
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.errors import TunelabError
from tuner.lab import capacity as lab_capacity
from tuner.studies.ab import ABReport, run_ab
from tuner.studies.ablate import AblationReport, KnobEffect, changed_knobs, run_ablation
from tuner.studies.capacity import CapacityAB, CapacityReport, Grid, LaunchCapacity
from tuner.studies.capacity_run import run_capacity, run_capacity_ab
from tuner.studies.capacity_search import CapacitySearchReport
from tuner.studies.capacity_sweep import CapacitySweep, run_capacity_sweep
from tuner.studies.common import study_name
from tuner.studies.search import SearchReport, run_search
from tuner.studies.sequential import Spending
from tuner.studies.slo import SLO, check_for_workload
from tuner.studies.space import Constraint, Param, Space
from tuner.studies.sweep import SweepReport, run_sweep
from tuner.studies.verify import (
    Reference,
    VerifyError,
    VerifyReport,
    reference_of,
    run_verify,
)
from tuner.trials.model import Trial

if TYPE_CHECKING:
    from tuner.export.preset import Preset

    # Deferred: the executor loads the engine and benchmark stack; not at a command's start.
    from tuner.studies.executor import TrialRunner

R_co = TypeVar("R_co", covariant=True)
P = TypeVar("P", bound="Plan[Any]")

ORDERS = ("abba", "abab")
SPENDINGS = ("pocock", "obf", "front")
SEARCH_MODES = ("throughput", "latency", "pareto")
# run_ab's sequential design allows this many launches per arm when only an
# equivalence margin is given (tuner.studies.ab).
EQUIVALENCE_LAUNCHES = 6

OnTrial = Callable[[Trial], None]
OnLaunch = Callable[[str, LaunchCapacity], None]


class PlanError(TunelabError, ValueError):
    """A study design no study could run (a wrong order, spending, objective or count)."""


@dataclass(frozen=True)
class Hooks:
    """What a face follows while a study runs (all optional; the store has everything).

    Attributes:
        on_trial: Each trial as it ends (done, failed or skipped).
        on_launch: Each capacity launch as it ends, with its arm ("" for a lone config).
        on_knob: Each ablation knob as its A/B ends.
    """

    on_trial: OnTrial | None = None
    on_launch: OnLaunch | None = None
    on_knob: Callable[[KnobEffect], None] | None = None


class Plan(Protocol[R_co]):
    """What every plan answers: its kind, study, size, stored form, and how it runs."""

    kind: ClassVar[str]

    @property
    def study(self) -> str | None: ...

    @property
    def title(self) -> str: ...

    def planned(self) -> int: ...

    @property
    def skips_extra(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...

    async def run(self, runner: TrialRunner, hooks: Hooks) -> R_co: ...


def named(plan: P) -> P:
    """``plan`` with its study named (``<kind>-<time>`` when the face gave none)."""
    if plan.study:
        return plan
    return dataclasses.replace(plan, study=study_name(plan.kind))  # type: ignore[type-var]


@dataclass(frozen=True)
class ABPlan:
    """An A/B of ``a`` (the baseline) against ``b``: counterbalanced launches and one verdict.

    Attributes:
        repeats: Launches per arm (the fixed design; the sequential design's first look).
        order: ``abba`` (counterbalanced) or ``abab``.
        objective: The result key the verdict is on.
        confidence: The interval's confidence.
        min_effect: The smallest relative difference that counts as a win.
        max_repeats: Sequential design: at most this many launches per arm.
        equivalence: Sequential design: a margin inside which A and B are equal.
        spending: The sequential design's alpha spending (pocock, obf or front).
        profile: Profile each arm's first launch after its measured run and say
            why B is faster, by kernel family (issue 29).
    """

    a: EngineConfig
    b: EngineConfig
    workload: Workload
    study: str | None = None
    repeats: int = 3
    order: str = "abba"
    objective: str = "output_throughput"
    confidence: float = 0.95
    min_effect: float = 0.0
    max_repeats: int | None = None
    equivalence: float | None = None
    spending: str = "pocock"
    profile: bool = False

    kind: ClassVar[str] = "ab"
    skips_extra: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise PlanError(f"--order must be abba or abab, not {self.order!r}")
        if self.spending not in SPENDINGS:
            raise PlanError(f"--spending must be pocock, obf or front, not {self.spending!r}")

    @property
    def title(self) -> str:
        return "A/B"

    def planned(self) -> int:
        """Launches the study may take: the sequential maximum, else the fixed repeats."""
        per_arm = self.max_repeats or (
            EQUIVALENCE_LAUNCHES if self.equivalence is not None else self.repeats
        )
        return 2 * per_arm

    def to_dict(self) -> dict[str, Any]:
        return _stored(self)

    async def run(self, runner: TrialRunner, hooks: Hooks) -> ABReport:
        order: Literal["abba", "abab"] = "abab" if self.order == "abab" else "abba"
        return await run_ab(
            self.a,
            self.b,
            self.workload,
            runner,
            repeats=self.repeats,
            order=order,
            study=self.study,
            objective=self.objective,
            confidence=self.confidence,
            min_rel_effect=self.min_effect,
            max_repeats=self.max_repeats,
            equivalence=self.equivalence,
            spending=Spending(self.spending),
            # The front-loaded design's boundaries are computed for the pooled t (sequential.py).
            pooled=self.spending == "front",
            on_trial=hooks.on_trial,
            profile=self.profile,
        )


@dataclass(frozen=True)
class SweepPlan:
    """One knob over its values, rest fixed; with more params, a descent knob by knob."""

    base: EngineConfig
    workload: Workload
    params: tuple[Param, ...]
    study: str | None = None
    repeats: int = 1
    constraints: tuple[Constraint, ...] = ()
    objective: str = "output_throughput"
    prune: bool = True

    kind: ClassVar[str] = "sweep"
    skips_extra: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not self.params:
            raise PlanError("a sweep needs a knob and its values: KEY=V1,V2,...")
        keys = [p.key for p in self.params]
        if len(set(keys)) != len(keys):
            raise PlanError(f"a knob is listed twice: {', '.join(keys)}")
        check_for_workload([c.metric for c in self.constraints], self.workload)

    @property
    def title(self) -> str:
        return "sweep"

    def planned(self) -> int:
        return sum(len(p.values()) for p in self.params) * self.repeats

    def to_dict(self) -> dict[str, Any]:
        return _stored(self)

    async def run(self, runner: TrialRunner, hooks: Hooks) -> SweepReport:
        return await run_sweep(
            self.base,
            self.workload,
            list(self.params),
            runner,
            repeats=self.repeats,
            constraints=self.constraints,
            objective=self.objective,
            study=self.study,
            on_trial=hooks.on_trial,
            prune=self.prune,
        )


@dataclass(frozen=True)
class SearchPlan:
    """Optuna over ``space`` for throughput, latency or both (``tunelab tune``)."""

    base: EngineConfig
    workload: Workload
    space: Space
    n_trials: int
    study: str | None = "tune"
    storage: str | None = None
    mode: str = "throughput"
    latency_metric: str = "p99_e2el_ms"
    seed: int | None = None
    prune: bool = True
    skip: bool = True

    kind: ClassVar[str] = "tune"
    skips_extra: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.mode not in SEARCH_MODES:
            raise PlanError(
                f"--objective must be throughput, latency, pareto or capacity, not {self.mode!r}"
            )
        check_for_workload([c.metric for c in self.space.constraints], self.workload)

    @property
    def title(self) -> str:
        return f"tune {self.study}"

    def planned(self) -> int:
        return self.n_trials

    def to_dict(self) -> dict[str, Any]:
        return _stored(self)

    async def run(self, runner: TrialRunner, hooks: Hooks) -> SearchReport:
        mode: Literal["throughput", "latency", "pareto"] = (
            "latency"
            if self.mode == "latency"
            else "pareto"
            if self.mode == "pareto"
            else "throughput"
        )
        return await run_search(
            self.base,
            self.workload,
            self.space,
            runner,
            n_trials=self.n_trials,
            study=self.study or "tune",
            storage=self.storage,
            mode=mode,
            latency_metric=self.latency_metric,
            seed=self.seed,
            on_trial=hooks.on_trial,
            prune=self.prune,
            skip=self.skip,
        )


@dataclass(frozen=True)
class CapacitySearchPlan:
    """Optuna over ``space`` maximising one launch's capacity at ``slo`` (``tune --objective capacity``)."""

    base: EngineConfig
    workload: Workload
    space: Space
    slo: SLO
    n_trials: int
    study: str | None = "tune"
    storage: str | None = None
    seed: int | None = None

    kind: ClassVar[str] = "tune-capacity"
    skips_extra: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_for_workload(self.slo.keys, self.workload)

    @property
    def title(self) -> str:
        return f"tune {self.study} (capacity)"

    def planned(self) -> int:
        return self.n_trials * lab_capacity.PROBES

    def to_dict(self) -> dict[str, Any]:
        return _stored(self)

    async def run(self, runner: TrialRunner, hooks: Hooks) -> CapacitySearchReport:
        return await lab_capacity.search(
            self.base,
            self.workload,
            self.space,
            self.slo,
            runner,
            n_trials=self.n_trials,
            study=self.study or "tune",
            storage=self.storage,
            seed=self.seed,
        )


@dataclass(frozen=True)
class CapacityPlan:
    """The largest load ``a`` carries at ``slo``; with ``b`` a capacity A/B, with ``sweep``
    the capacity of each value of one knob.

    ``workload`` is the probes' base workload (:func:`tuner.lab.capacity.probe_base`).
    """

    a: EngineConfig
    workload: Workload
    slo: SLO
    grid: Grid
    study: str | None = None
    b: EngineConfig | None = None
    sweep: Param | None = None
    launches: int = lab_capacity.LAUNCHES
    probes: int = lab_capacity.PROBES
    confidence: float = 0.95
    model: bool = True

    kind: ClassVar[str] = "capacity"
    skips_extra: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.b is not None and self.sweep is not None:
            raise PlanError("--sweep and --b-set/--b-preset: choose one")
        if self.sweep is not None and (
            self.sweep.kind != "categorical" or len(self.sweep.values()) < 2
        ):
            raise PlanError(
                f"--sweep needs two or more listed values of {self.sweep.key}: "
                f"{self.sweep.key}=V1,V2"
            )
        lab_capacity.check_plan(self.grid, launches=self.launches, probes=self.probes)
        check_for_workload(self.slo.keys, self.workload)

    @property
    def title(self) -> str:
        return "capacity"

    def arms(self) -> int:
        """Configs measured: 1, 2 for an A/B, one per value for a sweep."""
        if self.b is not None:
            return 2
        return len(self.sweep.values()) if self.sweep is not None else 1

    def planned(self) -> int:
        return self.arms() * self.launches * self.probes

    def to_dict(self) -> dict[str, Any]:
        return _stored(self)

    async def run(
        self, runner: TrialRunner, hooks: Hooks
    ) -> CapacityReport | CapacityAB | CapacitySweep:
        kwargs: dict[str, Any] = {
            "launches": self.launches,
            "probes": self.probes,
            "study": self.study,
            "confidence": self.confidence,
            "model": self.model,
        }
        report = hooks.on_launch
        if hooks.on_trial is not None:  # each probe as it ends, as the A/B and sweep give theirs
            runner = dataclasses.replace(
                runner, on_event=lab_capacity.recording(runner.on_event, hooks.on_trial)
            )
        if self.sweep is not None:
            return await run_capacity_sweep(
                self.a,
                self.sweep.key,
                list(self.sweep.values()),
                self.workload,
                self.slo,
                self.grid,
                runner,
                on_launch=report,
                **kwargs,
            )
        if self.b is not None:
            return await run_capacity_ab(
                self.a,
                self.b,
                self.workload,
                self.slo,
                self.grid,
                runner,
                on_launch=report,
                **kwargs,
            )

        def lone(answer: LaunchCapacity) -> None:
            if report is not None:
                report("", answer)

        return await run_capacity(
            self.a, self.workload, self.slo, self.grid, runner, on_launch=lone, **kwargs
        )


@dataclass(frozen=True)
class AblationPlan:
    """Which of ``winner``'s changes from ``baseline`` earn their place (``tunelab ablate``)."""

    winner: Trial
    baseline: Trial
    study: str | None = None
    repeats: int = 3
    max_repeats: int | None = None
    confidence: float = 0.95
    confirm: bool = True

    kind: ClassVar[str] = "ablate"
    skips_extra: ClassVar[bool] = False

    def __post_init__(self) -> None:
        changed_knobs(self.baseline.config, self.winner.config)  # AblateError: nothing to ablate

    @property
    def title(self) -> str:
        return "ablate"

    def planned(self) -> int:
        """Launches of the fixed design: an A/B per changed knob, and the confirmation."""
        knobs = len(changed_knobs(self.baseline.config, self.winner.config))
        return 2 * self.repeats * (knobs + int(self.confirm))

    def to_dict(self) -> dict[str, Any]:
        return {
            **_stored(self, skip=("winner", "baseline")),
            "winner": self.winner.id,
            "baseline": self.baseline.id,
        }

    async def run(self, runner: TrialRunner, hooks: Hooks) -> AblationReport:
        return await run_ablation(
            self.winner,
            self.baseline,
            runner,
            repeats=self.repeats,
            max_repeats=self.max_repeats,
            confidence=self.confidence,
            confirm=self.confirm,
            study=self.study,
            on_knob=hooks.on_knob,
        )


@dataclass(frozen=True)
class VerifyPlan:
    """Fresh launches of preset ``name`` judged against its stored figure (``presets verify``)."""

    name: str
    config: EngineConfig
    workload: Workload
    reference: Reference
    study: str | None = None
    repeats: int = 3
    confidence: float = 0.95
    tolerance: float = 0.0
    environment: tuple[str, ...] = field(default=())

    kind: ClassVar[str] = "verify"
    skips_extra: ClassVar[bool] = False

    @classmethod
    def of_preset(
        cls,
        preset: Preset,
        study: str | None = None,
        *,
        repeats: int = 3,
        confidence: float = 0.95,
        tolerance: float = 0.0,
        environment: tuple[str, ...] = (),
    ) -> VerifyPlan:
        """The verification of ``preset``: its \\[workload] re-run, judged against its \\[results].

        Raises:
            VerifyError: no usable figure in \\[results], or no \\[workload] to re-run.
            WorkloadError: a \\[workload] tunelab cannot run, or its dataset is unusable.
        """
        reference = reference_of(preset.results)
        if not preset.workload:
            raise VerifyError(
                "the preset has no [workload]: nothing says what to re-run",
                fix="export the preset from a finished trial (`tunelab export TRIAL`)",
            )
        workload = Workload.from_dict(preset.workload)
        # A dataset the [workload] names is read (bounded) and checked before any engine starts.
        check_dataset(workload)
        return cls(
            preset.name,
            preset.config,
            workload,
            reference,
            study,
            repeats=repeats,
            confidence=confidence,
            tolerance=tolerance,
            environment=environment,
        )

    @property
    def title(self) -> str:
        return "verify"

    def planned(self) -> int:
        return self.repeats

    def to_dict(self) -> dict[str, Any]:
        return _stored(self)

    async def run(self, runner: TrialRunner, hooks: Hooks) -> VerifyReport:
        return await run_verify(
            self.name,
            self.config,
            self.workload,
            self.reference,
            runner,
            repeats=self.repeats,
            confidence=self.confidence,
            tolerance=self.tolerance,
            study=self.study,
            environment=self.environment,
            on_trial=hooks.on_trial,
        )


def _stored(plan: Any, skip: Sequence[str] = ()) -> dict[str, Any]:
    """The plan's fields as JSON values (configs canonical, workload and space as their dicts)."""
    out: dict[str, Any] = {"kind": plan.kind}
    for f in dataclasses.fields(plan):
        if f.name not in skip:
            out[f.name] = _json(getattr(plan, f.name))
    return out


def _json(value: Any) -> Any:
    """One plan field as JSON: the object's own dict form where it has one."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, EngineConfig):
        return value.canonical()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, SLO | Constraint):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    return str(value)
