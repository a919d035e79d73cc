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

from collections.abc import Sequence
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
    NoSkipOpt,
    ObjectiveKeyOpt,
    OrderOpt,
    ParamOpt,
    ProfileOpt,
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
from tuner.cli.study_session import Session, emit, run_study
from tuner.cli.study_winner import winner_command
from tuner.errors import TunelabError
from tuner.lab import capacity as lab_capacity
from tuner.lab import config as lab_config
from tuner.lab import plan_input
from tuner.lab.plan_input import CAPACITY
from tuner.lab.plans import ABPlan, CapacitySearchPlan, SearchPlan, SweepPlan
from tuner.lab.study import Study

if TYPE_CHECKING:
    from pathlib import Path

    from tuner.config import EngineConfig
    from tuner.lab.plan_input import Constraint, Param, Space
    from tuner.studies.ab import ABReport
    from tuner.studies.slo import SLO
    from tuner.trials.guard_check import ArmsGuard
    from tuner.trials.store import TrialStore


def register(app: typer.Typer) -> None:
    """Adds ``ab``, ``sweep``, ``tune`` and ``winner`` to the tunelab CLI."""
    app.command("ab")(ab_command)
    app.command("sweep")(sweep_command)
    app.command("tune")(tune_command)
    app.command("winner")(winner_command)  # tuner.cli.study_winner


# -- ab ---------------------------------------------------------------------------------
def ab_command(
    ctx: typer.Context,
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
    profile: ProfileOpt = False,
) -> None:
    """A/B two configs: repeated, interleaved trials; per-metric interval and verdict."""
    opt.grant_consent(allow_code, allow_env)
    if report_only:
        _print_stored_ab(study, store_path, as_json)
        return
    _, goodput = split_slo("ab", slo)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, seed
    )
    # Both arms measure one workload: A's preset's [workload] (else B's), typed options over it.
    workload = opt.workload_over_preset("ab", ctx, wl.build("ab", goodput), a_preset or b_preset)
    a, b = _ab_arms(a_preset, b_preset, model, a_set, b_set)
    margin = parse_fraction("ab", "--equivalence", equivalence)
    try:
        plan = ABPlan(
            a,
            b,
            workload,
            study,
            repeats=repeats,
            order=order,
            objective=objective,
            confidence=confidence,
            min_effect=min_effect,
            max_repeats=max_repeats,
            equivalence=margin,
            spending=spending,
            profile=profile,
        )
    except TunelabError as exc:
        raise opt.usage_error("ab", exc.message) from None
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("ab")
    session = Session("ab", store_path, startup_timeout, verbose, guard)
    report, arms = _run_ab(session, plan, gpus)
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
    """The two arms' configs; refuses an A/B where neither arm was given anything.

    B starts from its own preset, else A's (``--a-preset P --b-set K=V`` is P against P with
    K=V, as ``capacity --b-set`` builds its arm B), else the base config.
    """
    if not (a_set or b_set or a_preset or b_preset):
        raise opt.usage_error(
            "ab",
            "arms A and B are both the base config: give --a-set/--b-set or --a-preset/--b-preset "
            "(to measure the noise on purpose, give the same --a-set and --b-set)",
        )
    a = opt.make_config("ab", a_preset, model, a_set)
    b = opt.make_config("ab", b_preset or a_preset, model, b_set)
    if a.config_id == b.config_id:
        typer.echo("note: A and B are the same config: this A/B measures the noise", err=True)
    return a, b


def _run_ab(session: Session, plan: ABPlan, gpus: str | None) -> tuple[ABReport, ArmsGuard]:
    """Runs the A/B and keeps which trials it ran as the study's last A/B (tuner.lab.study).

    Returns the report and the output guard's verdict on its arms (read while the
    store is open).
    """
    guards: list[ArmsGuard] = []

    def keep(store: TrialStore, report: ABReport) -> None:
        Study(store, report.study).remember_ab(report)
        guards.append(ab_guard_of(store, report))

    report = run_study(session, plan, gpus=gpus, keep=keep)
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
    ctx: typer.Context,
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
    try:
        params = plan_input.sweep_params(spec, descent or [])
    except TunelabError as exc:
        raise opt.usage_error("sweep", str(exc)) from None
    constraints, goodput = split_slo("sweep", slo)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, seed
    )
    workload = opt.workload_over_preset("sweep", ctx, wl.build("sweep", goodput), preset)
    base = opt.make_config("sweep", preset, model, set_items)
    _refuse_points("sweep", base, params)
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("sweep")
    session = Session("sweep", store_path, startup_timeout, verbose, guard)
    plan = SweepPlan(
        base,
        workload,
        params,
        study,
        repeats=repeats,
        constraints=tuple(constraints),
        objective=objective,
        prune=not no_prune,
    )
    report = run_study(session, plan, gpus=gpus)
    emit(report, as_json, lambda r: r.to_dict(), print_sweep)
    if report.best_trial is None:
        raise typer.Exit(1)


def _refuse_points(command: str, base: EngineConfig, params: Sequence[Param]) -> None:
    """Exit 2 before any trial when the policy refuses a value the study would run."""
    try:
        lab_config.enforce_params(base, params)
    except lab_config.ConfigInputError as exc:
        raise opt.user_error(command, exc) from None


# -- tune -------------------------------------------------------------------------------
def tune_command(
    ctx: typer.Context,
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
    no_skip: NoSkipOpt = False,
) -> None:
    """Search a space with Optuna under SLO constraints; resumable, and shareable between nodes."""
    opt.grant_consent(allow_code, allow_env)
    constraints, goodput = split_slo("tune", slo)
    space = _tune_space(objective, latency_metric, space_file, param, constraints)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, workload_seed
    )
    workload = opt.workload_over_preset("tune", ctx, wl.build("tune", goodput), preset)
    base = opt.make_config("tune", preset, model, set_items)
    # space.fixed (a dict[str, Any]) less its workload keys; the lab helper types it as object.
    fixed = plan_input.without_workload_keys(space.fixed)
    _refuse_points("tune", base.with_values(fixed), space.params)
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("tune")
    session = Session("tune", store_path, startup_timeout, verbose, guard)
    if objective == CAPACITY:
        target = capacity_slo(constraints)
        found = run_study(
            session,
            CapacitySearchPlan(base, workload, space, target, trials, study, storage, seed),
        )
        emit(found, as_json, lambda r: r.to_dict(), print_capacity_search)
        if found.measured == 0:
            raise typer.Exit(1)
        return
    plan = SearchPlan(
        base,
        workload,
        space,
        trials,
        study,
        storage,
        mode=objective,
        latency_metric=latency_metric,
        seed=seed,
        prune=not no_prune,
        skip=not no_skip,
    )
    report = run_study(session, plan, gpus=gpus)
    emit(report, as_json, lambda r: r.to_dict(), print_search)
    if report.measured == 0:
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
    """The search space (file, then --param, then --slo bounds; tuner.lab.plan_input), the
    objective checked before any trial."""
    try:
        return plan_input.tune_space(
            objective, latency_metric, space_file, param or [], constraints
        )
    except TunelabError as exc:
        raise opt.usage_error("tune", f"{exc} ({exc.fix})" if exc.fix else str(exc)) from None
