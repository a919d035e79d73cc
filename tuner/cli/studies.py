"""``tunelab ab``, ``tunelab sweep``, ``tunelab tune``, ``tunelab winner``: the studies, headless.

Each command builds its configs and workload with the shared options of
``tunelab run`` (tuner.cli.options), runs its study through
``tuner.studies`` with a study-level progress bar and ETA on stderr, and
prints a table or, with ``--json``, the report on stdout. ``--slo`` takes two
forms: ``METRIC<=VALUE`` (a constraint on a result key, e.g.
``p99_ttft_ms<=500``, that decides which trials count) and ``KEY:MS`` (a
goodput objective of the workload, e.g. ``ttft:500``, as in ``tunelab run``).
Every trial runs the output-drift guard (``--guard-prompts``,
``--guard-tokens``, ``--no-guard``; tuner.lab.run.guard_settings), and the A/B
report ends with its verdict on the arms (tuner.cli.guard_view). ``winner``
lives in tuner.cli.study_winner and is registered here.
Exit status: 0 when the study ran, 1 when it produced no usable measurement,
2 for input tunelab cannot use, 130 when interrupted.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from tuner.cli import options as opt
from tuner.cli.guard_view import ab_guard_of, arms_json
from tuner.cli.safe_text import clean
from tuner.cli.study_input import parse_fraction, split_slo
from tuner.cli.study_options import (
    AbStudyOpt,
    APresetOpt,
    ASetOpt,
    BPresetOpt,
    BSetOpt,
    ConfidenceOpt,
    DescentOpt,
    EquivalenceOpt,
    GpusOpt,
    LatencyMetricOpt,
    MaxRepeatsOpt,
    MinEffectOpt,
    NoPruneOpt,
    ObjectiveKeyOpt,
    OrderOpt,
    ParamOpt,
    RepeatsOpt,
    ReportOnlyOpt,
    SamplerSeedOpt,
    SloListOpt,
    SpaceFileOpt,
    SpendingOpt,
    StorageOpt,
    SweepSpecArg,
    SweepStudyOpt,
    TrialsOpt,
    TuneObjectiveOpt,
    TuneStudyOpt,
    VerboseOpt,
)
from tuner.cli.study_output import (
    dump,
    print_ab,
    print_capacity_search,
    print_search,
    print_sweep,
)
from tuner.cli.study_session import Session, emit, run_study, use_gpus
from tuner.cli.study_winner import winner_command
from tuner.lab import capacity as lab_capacity
from tuner.lab import config as lab_config
from tuner.lab.study import Study
from tuner.studies.ab import ABError, run_ab
from tuner.studies.capacity import CapacityError
from tuner.studies.search import SearchError, objectives_for, run_search
from tuner.studies.sequential import Spending
from tuner.studies.slo import SLOError, check_constraint
from tuner.studies.space import WORKLOAD_KEYS, Space, SpaceError, load_space, parse_param
from tuner.studies.sweep import SweepError, run_sweep

if TYPE_CHECKING:
    from pathlib import Path

    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.ab import ABReport
    from tuner.studies.executor import TrialRunner
    from tuner.studies.slo import SLO
    from tuner.studies.space import Constraint, Param
    from tuner.trials.guard_check import ArmsGuard
    from tuner.trials.store import TrialStore

# `tune --objective capacity`: each point is one capacity launch (tuner.studies.capacity_search).
CAPACITY = "capacity"


def register(app: typer.Typer) -> None:
    """Adds ``ab``, ``sweep``, ``tune`` and ``winner`` to the tunelab CLI."""
    app.command("ab")(ab_command)
    app.command("sweep")(sweep_command)
    app.command("tune")(tune_command)
    app.command("winner")(winner_command)  # tuner.cli.study_winner


# -- ab ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ABDesign:
    """How the A/B is run and judged (its options, passed to tuner.studies.ab.run_ab)."""

    repeats: int
    order: str
    objective: str
    confidence: float
    min_effect: float
    max_repeats: int | None
    equivalence: float | None
    spending: str = "pocock"

    def planned(self) -> int:
        """Launches the progress bar expects: the sequential maximum, else the fixed repeats.

        tuner.studies.ab's sequential design allows 6 launches per arm when only
        ``--equivalence`` is given.
        """
        return 2 * (self.max_repeats or (6 if self.equivalence is not None else self.repeats))


def ab_command(
    a_set: ASetOpt = None,
    b_set: BSetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
    allow_env: opt.AllowEnvOpt = None,
    a_preset: APresetOpt = None,
    b_preset: BPresetOpt = None,
    model: opt.ModelOpt = None,
    repeats: RepeatsOpt = 3,
    order: OrderOpt = "abba",
    max_repeats: MaxRepeatsOpt = None,
    equivalence: EquivalenceOpt = None,
    spending: SpendingOpt = "pocock",
    gpus: GpusOpt = None,
    objective: ObjectiveKeyOpt = "output_throughput",
    confidence: ConfidenceOpt = 0.95,
    min_effect: MinEffectOpt = 0.0,
    input_len: opt.InputLenOpt = opt.DEFAULT_INPUT_LEN,
    output_len: opt.OutputLenOpt = opt.DEFAULT_OUTPUT_LEN,
    num_prompts: opt.NumPromptsOpt = opt.DEFAULT_NUM_PROMPTS,
    concurrency: opt.ConcurrencyOpt = None,
    request_rate: opt.RequestRateOpt = "inf",
    warmup: opt.WarmupOpt = opt.DEFAULT_WARMUP,
    seed: opt.SeedOpt = 0,
    slo: SloListOpt = None,
    study: AbStudyOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
    guard_prompts: opt.GuardPromptsOpt = None,
    guard_tokens: opt.GuardTokensOpt = None,
    no_guard: opt.NoGuardOpt = False,
    report_only: ReportOnlyOpt = False,
) -> None:
    """A/B two configs: repeated, interleaved trials; per-metric interval and verdict."""
    opt.grant_consent(allow_code, allow_env)
    if report_only:
        _print_stored_ab(study, store_path, as_json)
        return
    if order not in ("abba", "abab"):
        raise opt.usage_error("ab", f"--order must be abba or abab, not {order!r}")
    _, goodput = split_slo("ab", slo)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, seed
    )
    workload = wl.build("ab", goodput)
    a, b = _ab_arms(a_preset, b_preset, model, a_set, b_set)
    margin = parse_fraction("ab", "--equivalence", equivalence)
    if spending not in ("pocock", "obf", "front"):
        raise opt.usage_error("ab", f"--spending must be pocock, obf or front, not {spending!r}")
    design = _ABDesign(
        repeats, order, objective, confidence, min_effect, max_repeats, margin, spending
    )
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("ab")
    session = Session("ab", store_path, startup_timeout, verbose, guard)
    report, arms = _run_ab(session, design, a, b, workload, study, gpus)
    _print_ab_report(report, arms, as_json)
    row = report.objective_row
    if row is None or row.a.n < 1 or row.b.n < 1:
        raise typer.Exit(1)


def _ab_arms(
    a_preset: str | None,
    b_preset: str | None,
    model: str | None,
    a_set: list[str] | None,
    b_set: list[str] | None,
) -> tuple[EngineConfig, EngineConfig]:
    """The two arms' configs; refuses an A/B where neither arm was given anything."""
    if not (a_set or b_set or a_preset or b_preset):
        raise opt.usage_error(
            "ab",
            "arms A and B are both the base config: give --a-set/--b-set or --a-preset/--b-preset "
            "(to measure the noise on purpose, give the same --a-set and --b-set)",
        )
    a = opt.make_config("ab", a_preset, model, a_set)
    b = opt.make_config("ab", b_preset, model, b_set)
    if a.config_id == b.config_id:
        typer.echo("note: A and B are the same config: this A/B measures the noise", err=True)
    return a, b


def _run_ab(
    session: Session,
    design: _ABDesign,
    a: EngineConfig,
    b: EngineConfig,
    workload: Workload,
    study: str | None,
    gpus: str | None,
) -> tuple[ABReport, ArmsGuard]:
    """Runs the A/B and keeps which trials it ran as the study's last A/B (tuner.lab.study).

    Returns the report and the output guard's verdict on its arms (read while the
    store is open).
    """
    guards: list[ArmsGuard] = []

    def keep(store: TrialStore, report: ABReport) -> None:
        Study(store, report.study).remember_ab(report)
        guards.append(ab_guard_of(store, report))

    def start(runner: TrialRunner) -> Awaitable[ABReport]:
        return run_ab(
            a,
            b,
            workload,
            runner,
            repeats=design.repeats,
            order=design.order,  # type: ignore[arg-type]
            study=study,
            objective=design.objective,
            confidence=design.confidence,
            min_rel_effect=design.min_effect,
            max_repeats=design.max_repeats,
            equivalence=design.equivalence,
            spending=Spending(design.spending),
            # The front-loaded design's boundaries are computed for the pooled t (sequential.py).
            pooled=design.spending == "front",
        )

    report = run_study(
        session,
        "A/B",
        design.planned(),
        start,
        (ABError,),
        prepare=lambda runner: use_gpus("ab", runner, gpus),
        keep=keep,
    )
    return report, guards[0]


def _print_ab_report(report: ABReport, arms: ArmsGuard, as_json: bool) -> None:
    """The A/B report: its JSON, or the table (tuner.cli.study_output) and the summary;
    both with what the output guard says about the arms (tuner.trials.guard_check.ab_guard).
    """
    if as_json:
        typer.echo(dump({**report.to_dict(), "output_guard": arms_json(arms)}))
        return
    print_ab(report)
    typer.echo(clean(arms.summary()))


def _print_stored_ab(study: str | None, store_path: str | None, as_json: bool) -> None:
    """``tunelab ab --report``: the study's last A/B, rebuilt from its stored trials."""
    if not study:
        raise opt.usage_error("ab", "--report needs --study NAME (`tunelab results` lists studies)")
    store = opt.open_store("ab", store_path, recover=False)
    try:
        report = Study(store, study).last_ab()
        arms = ab_guard_of(store, report) if report is not None else None
    finally:
        store.close()
    if report is None or arms is None:
        raise opt.usage_error("ab", f"study {study!r} has no A/B in the store")
    _print_ab_report(report, arms, as_json)


# -- sweep ------------------------------------------------------------------------------
def sweep_command(
    spec: SweepSpecArg,
    descent: DescentOpt = None,
    preset: opt.PresetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
    allow_env: opt.AllowEnvOpt = None,
    set_items: opt.SetOpt = None,
    model: opt.ModelOpt = None,
    repeats: RepeatsOpt = 1,
    objective: ObjectiveKeyOpt = "output_throughput",
    input_len: opt.InputLenOpt = opt.DEFAULT_INPUT_LEN,
    output_len: opt.OutputLenOpt = opt.DEFAULT_OUTPUT_LEN,
    num_prompts: opt.NumPromptsOpt = opt.DEFAULT_NUM_PROMPTS,
    concurrency: opt.ConcurrencyOpt = None,
    request_rate: opt.RequestRateOpt = "inf",
    warmup: opt.WarmupOpt = opt.DEFAULT_WARMUP,
    seed: opt.SeedOpt = 0,
    slo: SloListOpt = None,
    study: SweepStudyOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
    guard_prompts: opt.GuardPromptsOpt = None,
    guard_tokens: opt.GuardTokensOpt = None,
    no_guard: opt.NoGuardOpt = False,
    gpus: GpusOpt = None,
    no_prune: NoPruneOpt = False,
) -> None:
    """Sweep one knob over values (rest fixed); --descent moves on knob by knob keeping the best."""
    opt.grant_consent(allow_code, allow_env)
    params = _sweep_params(spec, descent)
    constraints, goodput = split_slo("sweep", slo)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, seed
    )
    workload = wl.build("sweep", goodput)
    base = opt.make_config("sweep", preset, model, set_items)
    _refuse_points("sweep", base, params)
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("sweep")
    session = Session("sweep", store_path, startup_timeout, verbose, guard)
    planned = sum(len(p.values()) for p in params) * repeats
    report = run_study(
        session,
        "sweep",
        planned,
        lambda runner: run_sweep(
            base,
            workload,
            params,
            runner,
            repeats=repeats,
            constraints=constraints,
            objective=objective,
            study=study,
            prune=not no_prune,
        ),
        (SweepError, SpaceError),
        prepare=lambda runner: use_gpus("sweep", runner, gpus),
    )
    emit(report, as_json, lambda r: r.to_dict(), print_sweep)
    if report.best_trial is None:
        raise typer.Exit(1)


def _refuse_points(command: str, base: EngineConfig, params: list[Param]) -> None:
    """Exit 2 before any trial when the policy refuses a value the study would run."""
    try:
        lab_config.enforce_params(base, params)
    except lab_config.ConfigInputError as exc:
        raise opt.user_error(command, exc) from None


def _sweep_params(spec: str, descent: list[str] | None) -> list[Param]:
    """The swept knob and the --descent ones (tuner.studies.space), each knob once."""
    try:
        params = [parse_param(spec), *(parse_param(d) for d in descent or [])]
        for p in params:
            p.values()  # a range that cannot be listed is refused here, before any trial
    except SpaceError as exc:
        raise opt.usage_error("sweep", str(exc)) from None
    keys = [p.key for p in params]
    if len(set(keys)) != len(keys):
        raise opt.usage_error("sweep", f"a knob is listed twice: {', '.join(keys)}")
    return params


# -- tune -------------------------------------------------------------------------------
def tune_command(
    trials: TrialsOpt,
    space_file: SpaceFileOpt = None,
    param: ParamOpt = None,
    objective: TuneObjectiveOpt = "throughput",
    latency_metric: LatencyMetricOpt = "p99_e2el_ms",
    storage: StorageOpt = None,
    study: TuneStudyOpt = "tune",
    seed: SamplerSeedOpt = None,
    preset: opt.PresetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
    allow_env: opt.AllowEnvOpt = None,
    set_items: opt.SetOpt = None,
    model: opt.ModelOpt = None,
    input_len: opt.InputLenOpt = opt.DEFAULT_INPUT_LEN,
    output_len: opt.OutputLenOpt = opt.DEFAULT_OUTPUT_LEN,
    num_prompts: opt.NumPromptsOpt = opt.DEFAULT_NUM_PROMPTS,
    concurrency: opt.ConcurrencyOpt = None,
    request_rate: opt.RequestRateOpt = "inf",
    warmup: opt.WarmupOpt = opt.DEFAULT_WARMUP,
    workload_seed: opt.SeedOpt = 0,
    slo: SloListOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
    guard_prompts: opt.GuardPromptsOpt = None,
    guard_tokens: opt.GuardTokensOpt = None,
    no_guard: opt.NoGuardOpt = False,
    gpus: GpusOpt = None,
    no_prune: NoPruneOpt = False,
) -> None:
    """Search a space with Optuna under SLO constraints; resumable, and shareable between nodes."""
    opt.grant_consent(allow_code, allow_env)
    constraints, goodput = split_slo("tune", slo)
    space = _tune_space(objective, latency_metric, space_file, param, constraints)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, workload_seed
    )
    workload = wl.build("tune", goodput)
    base = opt.make_config("tune", preset, model, set_items)
    fixed = {k: v for k, v in space.fixed.items() if k not in WORKLOAD_KEYS}
    _refuse_points("tune", base.with_values(fixed), space.params)
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("tune")
    session = Session("tune", store_path, startup_timeout, verbose, guard)
    if objective == CAPACITY:
        target = capacity_slo(constraints)
        _tune_capacity(
            session, base, workload, space, target, trials, study, storage, seed, as_json
        )
        return
    report = run_study(
        session,
        f"tune {study}",
        trials,
        lambda runner: run_search(
            base,
            workload,
            space,
            runner,
            n_trials=trials,
            study=study,
            storage=storage,
            mode=objective,  # type: ignore[arg-type]
            latency_metric=latency_metric,
            seed=seed,
            prune=not no_prune,
        ),
        (SearchError, SpaceError),
        prepare=lambda runner: use_gpus("tune", runner, gpus),
        skips_extra=True,
    )
    emit(report, as_json, lambda r: r.to_dict(), print_search)
    if report.measured == 0:
        raise typer.Exit(1)


def _tune_capacity(
    session: Session,
    base: EngineConfig,
    workload: Workload,
    space: Space,
    target: SLO,
    trials: int,
    study: str,
    storage: str | None,
    seed: int | None,
    as_json: bool,
) -> None:
    """``tune --objective capacity``: one capacity launch per Optuna point; exit 1 if none measured."""
    found = run_study(
        session,
        f"tune {study} (capacity)",
        trials * lab_capacity.PROBES,
        lambda runner: lab_capacity.search(
            base,
            workload,
            space,
            target,
            runner,
            n_trials=trials,
            study=study,
            storage=storage,
            seed=seed,
        ),
        (SearchError, SpaceError, CapacityError),
    )
    emit(found, as_json, lambda r: r.to_dict(), print_capacity_search)
    if found.measured == 0:
        raise typer.Exit(1)


def capacity_slo(constraints: list[Constraint]) -> SLO:
    """``--objective capacity``'s SLO: the --slo bounds, checked as `tunelab capacity` checks them."""
    if not constraints:
        raise opt.usage_error(
            "tune", "--objective capacity needs the SLO to hold: --slo 'p99_ttft_ms<=500'"
        )
    try:
        return lab_capacity.parse(",".join(str(c) for c in constraints))
    except lab_capacity.SLOError as exc:
        raise opt.usage_error("tune", f"{exc} ({exc.fix})" if exc.fix else str(exc)) from None


def _tune_space(
    objective: str,
    latency_metric: str,
    space_file: Path | None,
    param: list[str] | None,
    constraints: list[Constraint],
) -> Space:
    """The search space (file, then --param, then --slo bounds); the objective checked by
    tuner.studies.search before any trial."""
    if objective not in ("throughput", "latency", "pareto", CAPACITY):
        raise opt.usage_error(
            "tune",
            f"--objective must be throughput, latency, pareto or capacity, not {objective!r}",
        )
    if space_file is None and not param:
        raise opt.usage_error(
            "tune", "nothing to search: give --space FILE or --param KEY=V1,V2,..."
        )
    try:
        space = load_space(space_file) if space_file else Space()
        for bound in space.constraints:  # a file's bounds meet the checks --slo's do
            check_constraint(bound)
        extra = [parse_param(p) for p in param or []]
        if objective == CAPACITY:  # the --slo bounds are the capacity's SLO, not constraints
            return Space([*space.params, *extra], list(space.constraints), dict(space.fixed))
        space = Space(
            [*space.params, *extra], [*space.constraints, *constraints], dict(space.fixed)
        )
        objectives_for(objective, latency_metric)  # type: ignore[arg-type]
    except (SpaceError, SearchError, SLOError) as exc:
        raise opt.usage_error("tune", f"{exc} ({exc.fix})" if exc.fix else str(exc)) from None
    return space
