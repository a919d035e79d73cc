"""``tunelab ab``, ``tunelab sweep``, ``tunelab tune``, ``tunelab winner``: the studies, headless.

Each command builds its configs and workload with the shared options of
``tunelab run`` (tuner.cli.options), runs its study through
``tuner.studies`` with a study-level progress bar and ETA on stderr, and
prints a table or, with ``--json``, the report on stdout. ``--slo`` takes two
forms: ``METRIC<=VALUE`` (a constraint on a result key, e.g.
``p99_ttft_ms<=500``, that decides which trials count) and ``KEY:MS`` (a
goodput objective of the workload, e.g. ``ttft:500``, as in ``tunelab run``).
Exit status: 0 when the study ran, 1 when it produced no usable measurement,
2 for input tunelab cannot use, 130 when interrupted.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from tuner.cli import options as opt

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.studies.executor import TrialRunner
    from tuner.studies.space import Constraint
    from tuner.trials.events import TrialEventCallback
    from tuner.trials.store import TrialStore

T = TypeVar("T")

SloListOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--slo",
        help="Repeatable. METRIC<=VALUE constrains which trials count (e.g. p99_ttft_ms<=500); "
        "KEY:MS sets a goodput SLO of the workload (e.g. ttft:500).",
    ),
]
RepeatsOpt = Annotated[int, typer.Option("--repeats", min=1, help="Trials per arm or point.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Also print engine log lines.")]
ObjectiveKeyOpt = Annotated[
    str,
    typer.Option(
        "--objective", help="Result key to compare/rank by (e.g. output_throughput, p99_ttft_ms)."
    ),
]
GpusOpt = Annotated[
    str | None,
    typer.Option(
        "--gpus",
        help="GPU ids the study may use, e.g. 0,1,2,3 (default: all visible). Trials run side "
        "by side, one engine per GPU slot of TP x PP x DP GPUs.",
    ),
]


def register(app: typer.Typer) -> None:
    """Adds ``ab``, ``sweep``, ``tune`` and ``winner`` to the tunelab CLI."""
    app.command("ab")(ab_command)
    app.command("sweep")(sweep_command)
    app.command("tune")(tune_command)
    app.command("winner")(winner_command)


# -- shared helpers -------------------------------------------------------------------
def split_slo(command: str, items: list[str] | None) -> tuple[list[Constraint], str | None]:
    """Separates METRIC<=VALUE constraints from KEY:MS goodput SLOs (joined for make_workload)."""
    from tuner.studies.space import SpaceError, parse_constraint

    constraints: list[Constraint] = []
    goodput: list[str] = []
    for item in items or []:
        if any(op in item for op in ("<", ">")):
            try:
                constraints.append(parse_constraint(item))
            except SpaceError as exc:
                raise opt.usage_error(command, str(exc)) from None
        elif ":" in item:
            goodput.append(item)
        else:
            raise opt.usage_error(
                command,
                f"--slo {item!r}: write METRIC<=VALUE (e.g. p99_ttft_ms<=500) or KEY:MS (e.g. ttft:500)",
            )
    return constraints, ",".join(goodput) or None


def make_runner(
    store: TrialStore, on_event: TrialEventCallback | None, startup_timeout: float
) -> TrialRunner:
    """The trial runner the study commands use (tests replace it to run an engine double)."""
    from tuner.studies.executor import TrialRunner

    return TrialRunner(store, on_event, {"startup_timeout": startup_timeout})


def use_gpus(command: str, runner: TrialRunner, gpus: str | None) -> None:
    """Restricts the runner to ``--gpus`` and finds the GPUs now, so a bad list is a usage error."""
    from tuner.trials.slots import SlotError, parse_gpu_list

    try:
        runner.gpus = parse_gpu_list(gpus) if gpus is not None else None
        runner.pool  # noqa: B018 - resolves (and checks) the GPU list before any trial starts
    except SlotError as exc:
        raise opt.usage_error(command, str(exc)) from None


def parse_fraction(command: str, option: str, text: str | None) -> float | None:
    """``2%`` or ``0.02`` → 0.02."""
    if text is None:
        return None
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise opt.usage_error(
            command, f"{option} takes a percentage such as 2%, not {text!r}"
        ) from None
    if not 0.0 < value < 1.0:
        raise opt.usage_error(command, f"{option} must be between 0% and 100%, got {text!r}")
    return value


def _run_async(command: str, make: Callable[[], Awaitable[T]]) -> T:
    """Runs the study; SIGTERM cancels like Ctrl-C (engine stopped, trial marked interrupted)."""
    import asyncio

    async def main() -> T:
        task = asyncio.current_task()
        if task is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await make()

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.echo(
            f"tunelab {command}: interrupted; the running trial is marked interrupted", err=True
        )
        raise typer.Exit(130) from None


def _workload(command: str, goodput: str | None, **kw: Any) -> Workload:
    return opt.make_workload(command, slo=goodput, **kw)


# -- ab ---------------------------------------------------------------------------------
def ab_command(
    a_set: Annotated[
        list[str] | None, typer.Option("--a-set", help="KEY=VALUE for arm A (repeatable).")
    ] = None,
    b_set: Annotated[
        list[str] | None, typer.Option("--b-set", help="KEY=VALUE for arm B (repeatable).")
    ] = None,
    allow_code: opt.AllowCodeOpt = False,
    a_preset: Annotated[
        str | None, typer.Option("--a-preset", help="Preset TOML for arm A.")
    ] = None,
    b_preset: Annotated[
        str | None, typer.Option("--b-preset", help="Preset TOML for arm B.")
    ] = None,
    model: opt.ModelOpt = None,
    repeats: RepeatsOpt = 3,
    order: Annotated[
        str, typer.Option("--order", help="abba (counterbalanced: cancels linear drift) or abab.")
    ] = "abba",
    max_repeats: Annotated[
        int | None,
        typer.Option(
            "--max-repeats",
            min=2,
            help="Sequential A/B: look after every round and stop once the verdict is clear "
            "(error rate kept by alpha spending), at most this many launches per arm.",
        ),
    ] = None,
    equivalence: Annotated[
        str | None,
        typer.Option(
            "--equivalence",
            help="Sequential A/B: also stop when no difference bigger than this is left, e.g. 2%.",
        ),
    ] = None,
    gpus: GpusOpt = None,
    objective: ObjectiveKeyOpt = "output_throughput",
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999)] = 0.95,
    min_effect: Annotated[
        float,
        typer.Option(
            "--min-effect", min=0.0, help="Smallest relative gain that counts (0.02 = 2%)."
        ),
    ] = 0.0,
    input_len: opt.InputLenOpt = opt.DEFAULT_INPUT_LEN,
    output_len: opt.OutputLenOpt = opt.DEFAULT_OUTPUT_LEN,
    num_prompts: opt.NumPromptsOpt = opt.DEFAULT_NUM_PROMPTS,
    concurrency: opt.ConcurrencyOpt = None,
    request_rate: opt.RequestRateOpt = "inf",
    warmup: opt.WarmupOpt = opt.DEFAULT_WARMUP,
    seed: opt.SeedOpt = 0,
    slo: SloListOpt = None,
    study: Annotated[
        str | None, typer.Option("--study", help="Study name (default ab-<time>).")
    ] = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
    report_only: Annotated[
        bool,
        typer.Option(
            "--report",
            help="Run nothing: print the report of the --study's last A/B from the store "
            "(the same verdict the TUI shows).",
        ),
    ] = False,
) -> None:
    """A/B two configs: repeated, interleaved trials; per-metric interval and verdict."""
    from tuner.cli.study_output import StudyProgress, dump, print_ab
    from tuner.lab.study import Study
    from tuner.studies.ab import ABError, run_ab

    if report_only:
        _print_stored_ab(study, store_path, as_json)
        return
    if order not in ("abba", "abab"):
        raise opt.usage_error("ab", f"--order must be abba or abab, not {order!r}")
    if not (a_set or b_set or a_preset or b_preset):
        raise opt.usage_error(
            "ab",
            "arms A and B are both the base config: give --a-set/--b-set or --a-preset/--b-preset "
            "(to measure the noise on purpose, give the same --a-set and --b-set)",
        )
    _, goodput = split_slo("ab", slo)
    workload = _workload(
        "ab",
        goodput,
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        concurrency=concurrency,
        request_rate=request_rate,
        warmup=warmup,
        seed=seed,
    )
    a = opt.make_config("ab", a_preset, model, a_set, allow_code=allow_code)
    b = opt.make_config("ab", b_preset, model, b_set, allow_code=allow_code)
    if a.config_id == b.config_id:
        typer.echo("note: A and B are the same config: this A/B measures the noise", err=True)
    margin = parse_fraction("ab", "--equivalence", equivalence)
    store = opt.open_store("ab", store_path)
    try:
        planned = 2 * (max_repeats or (6 if margin is not None else repeats))
        with StudyProgress("A/B", planned, show_log=verbose) as progress:
            runner = make_runner(store, progress, startup_timeout)
            use_gpus("ab", runner, gpus)
            report = _run_async(
                "ab",
                lambda: run_ab(
                    a,
                    b,
                    workload,
                    runner,
                    repeats=repeats,
                    order=order,  # type: ignore[arg-type]
                    study=study,
                    objective=objective,
                    confidence=confidence,
                    min_rel_effect=min_effect,
                    max_repeats=max_repeats,
                    equivalence=margin,
                ),
            )
        Study(store, report.study).remember_ab(report)
    except ABError as exc:
        raise opt.usage_error("ab", str(exc)) from None
    finally:
        store.close()
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_ab(report)
    row = report.objective_row
    if row is None or row.a.n < 1 or row.b.n < 1:
        raise typer.Exit(1)


def _print_stored_ab(study: str | None, store_path: str | None, as_json: bool) -> None:
    """``tunelab ab --report``: the study's last A/B, rebuilt from its stored trials."""
    from tuner.cli.study_output import dump, print_ab
    from tuner.lab.study import Study

    if not study:
        raise opt.usage_error("ab", "--report needs --study NAME (`tunelab results` lists studies)")
    store = opt.open_store("ab", store_path, recover=False)
    try:
        report = Study(store, study).last_ab()
    finally:
        store.close()
    if report is None:
        raise opt.usage_error("ab", f"study {study!r} has no A/B in the store")
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_ab(report)


# -- sweep ------------------------------------------------------------------------------
def sweep_command(
    spec: Annotated[
        str, typer.Argument(metavar="KEY=V1,V2,...", help="The knob (or workload field) to sweep.")
    ],
    descent: Annotated[
        list[str] | None,
        typer.Option(
            "--descent", help="More KEY=V1,V2,... for coordinate descent, in order (repeatable)."
        ),
    ] = None,
    preset: opt.PresetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
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
    study: Annotated[
        str | None, typer.Option("--study", help="Study name (default sweep-<time>).")
    ] = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Sweep one knob over values (rest fixed); --descent moves on knob by knob keeping the best."""
    from tuner.cli.study_output import StudyProgress, dump, print_sweep
    from tuner.studies.space import SpaceError, parse_param
    from tuner.studies.sweep import SweepError, run_sweep

    try:
        params = [parse_param(spec), *(parse_param(d) for d in descent or [])]
        planned = sum(len(p.values()) for p in params) * repeats
    except SpaceError as exc:
        raise opt.usage_error("sweep", str(exc)) from None
    keys = [p.key for p in params]
    if len(set(keys)) != len(keys):
        raise opt.usage_error("sweep", f"a knob is listed twice: {', '.join(keys)}")
    constraints, goodput = split_slo("sweep", slo)
    workload = _workload(
        "sweep",
        goodput,
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        concurrency=concurrency,
        request_rate=request_rate,
        warmup=warmup,
        seed=seed,
    )
    base = opt.make_config("sweep", preset, model, set_items, allow_code=allow_code)
    store = opt.open_store("sweep", store_path)
    try:
        with StudyProgress("sweep", planned, show_log=verbose) as progress:
            runner = make_runner(store, progress, startup_timeout)
            report = _run_async(
                "sweep",
                lambda: run_sweep(
                    base,
                    workload,
                    params,
                    runner,
                    repeats=repeats,
                    constraints=constraints,
                    objective=objective,
                    study=study,
                ),
            )
    except (SweepError, SpaceError) as exc:
        raise opt.usage_error("sweep", str(exc)) from None
    finally:
        store.close()
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_sweep(report)
    if report.best_trial is None:
        raise typer.Exit(1)


# -- tune -------------------------------------------------------------------------------
def tune_command(
    trials: Annotated[int, typer.Option("--trials", min=1, help="Points to measure in this run.")],
    space_file: Annotated[
        Path | None,
        typer.Option(
            "--space", help="Search space file (TOML or JSON: \\[params], slo, \\[fixed])."
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", help="KEY=V1,V2,... | KEY=int:LO..HI[:log] | KEY=float:LO..HI (repeatable)."
        ),
    ] = None,
    objective: Annotated[
        str,
        typer.Option("--objective", help="throughput, latency, or pareto (throughput vs latency)."),
    ] = "throughput",
    latency_metric: Annotated[
        str, typer.Option("--latency-metric", help="Latency key for latency/pareto objectives.")
    ] = "p99_e2el_ms",
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Optuna storage URL (default sqlite:///<data dir>/optuna.db; "
            "postgresql://... to share a study between nodes).",
        ),
    ] = None,
    study: Annotated[
        str, typer.Option("--study", help="Study name; re-running resumes it.")
    ] = "tune",
    seed: Annotated[int | None, typer.Option("--sampler-seed", help="Seed of the sampler.")] = None,
    preset: opt.PresetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
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
) -> None:
    """Search a space with Optuna under SLO constraints; resumable, and shareable between nodes."""
    from tuner.cli.study_output import StudyProgress, dump, print_search
    from tuner.studies.search import SearchError, objectives_for, run_search
    from tuner.studies.space import Space, SpaceError, load_space, parse_param

    if objective not in ("throughput", "latency", "pareto"):
        raise opt.usage_error(
            "tune", f"--objective must be throughput, latency or pareto, not {objective!r}"
        )
    if space_file is None and not param:
        raise opt.usage_error(
            "tune", "nothing to search: give --space FILE or --param KEY=V1,V2,..."
        )
    constraints, goodput = split_slo("tune", slo)
    try:
        space = load_space(space_file) if space_file else Space()
        extra = [parse_param(p) for p in param or []]
        space = Space(
            [*space.params, *extra], [*space.constraints, *constraints], dict(space.fixed)
        )
        objectives_for(objective, latency_metric)  # type: ignore[arg-type]
    except (SpaceError, SearchError) as exc:
        raise opt.usage_error("tune", str(exc)) from None
    workload = _workload(
        "tune",
        goodput,
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        concurrency=concurrency,
        request_rate=request_rate,
        warmup=warmup,
        seed=workload_seed,
    )
    base = opt.make_config("tune", preset, model, set_items, allow_code=allow_code)
    store = opt.open_store("tune", store_path)
    try:
        with StudyProgress(f"tune {study}", trials, show_log=verbose, skips_extra=True) as progress:
            runner = make_runner(store, progress, startup_timeout)
            report = _run_async(
                "tune",
                lambda: run_search(
                    base,
                    workload,
                    space,
                    runner,
                    n_trials=trials,
                    study=study,
                    storage=storage,
                    mode=objective,
                    latency_metric=latency_metric,
                    seed=seed,  # type: ignore[arg-type]
                ),
            )
    except (SearchError, SpaceError) as exc:
        raise opt.usage_error("tune", str(exc)) from None
    finally:
        store.close()
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_search(report)
    if report.measured == 0:
        raise typer.Exit(1)


# -- winner -----------------------------------------------------------------------------
def winner_command(
    study: Annotated[
        str | None, typer.Option("--study", help="Study (default: the most recent one).")
    ] = None,
    objective: Annotated[
        str | None,
        typer.Option("--objective", help="Result key to rank by (default: the study's)."),
    ] = None,
    slo: Annotated[
        list[str] | None,
        typer.Option(
            "--slo", help="METRIC<=VALUE (repeatable); default: the SLO the study ran with."
        ),
    ] = None,
    store_path: opt.StoreOpt = None,
    as_json: opt.JsonOpt = False,
) -> None:
    """The best trial of a study by its objective among those meeting the SLO, with its margin."""
    from tuner.cli.study_output import dump, print_winner
    from tuner.studies.winner import WinnerError, pick_winner

    constraints, goodput = split_slo("winner", slo)
    if goodput:
        raise opt.usage_error(
            "winner", "--slo here takes METRIC<=VALUE bounds (e.g. p99_ttft_ms<=500)"
        )
    with opt.open_store("winner", store_path, recover=False) as store:
        if study is None:
            studies = store.studies()
            if not studies:
                raise opt.usage_error("winner", f"no trials in {store.path}; run a study first")
            study = max(studies, key=lambda s: s.last_at).name
        trials = store.list(study)
    try:
        report = pick_winner(
            trials, study=study, objective=objective, constraints=constraints if slo else None
        )
    except WinnerError as exc:
        typer.echo(f"tunelab winner: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_winner(report)
