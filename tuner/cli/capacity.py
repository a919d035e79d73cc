"""``tunelab capacity``: the largest load a config carries while an SLO holds, with its interval.

``tunelab capacity --slo 'p99_ttft_ms<=500' --by concurrency --launches 3``
searches one engine launch at a time (doubling, then bisection, as vLLM's
``vllm bench sweep serve_sla``) and prints the mean capacity over launches
with its t interval: "max concurrency meeting p99_ttft_ms<=500: 48 [44, 52]".
Every probe is a stored trial of the study (``tunelab results --study``).
``--b-set`` makes it a capacity A/B; ``--sweep KEY=V1,V2,...`` a capacity
sweep over one knob (tuner.studies.capacity_sweep).
Exit status: 0 when a capacity was measured, 1 when no launch measured one,
2 for input tunelab cannot use, 130 when interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli import options as opt
from tuner.cli.safe_text import markup
from tuner.cli.study_options import CapacityStudyOpt, ConfidenceOpt, VerboseOpt
from tuner.cli.study_output import dump
from tuner.cli.study_session import Session, run_study
from tuner.errors import TunelabError, with_fix
from tuner.guard.settings import GuardSettings
from tuner.lab import capacity as lab_capacity
from tuner.lab import config as lab_config
from tuner.lab import plan_input
from tuner.lab.limits import MAX_LAUNCHES, MAX_PROBES
from tuner.lab.plans import CapacityPlan, Hooks

if TYPE_CHECKING:
    from tuner.config import EngineConfig
    from tuner.lab.plan_input import Param
    from tuner.studies.capacity import CapacityAB, CapacityReport, LaunchCapacity
    from tuner.studies.capacity_sweep import CapacitySweep

SloOpt = Annotated[
    str,
    typer.Option(
        "--slo",
        help="Bounds every probe must meet, vLLM's spelling: p99_ttft_ms<=500,p99_itl_ms<=50 "
        "(keys mean/median/p50/p90/p95/p99 of ttft, tpot, itl, e2el, in ms).",
    ),
]
ByOpt = Annotated[
    str,
    typer.Option("--by", help="The load to raise: concurrency (users) or rate (requests/s)."),
]
LaunchesOpt = Annotated[
    int,
    typer.Option(
        "--launches", min=1, max=MAX_LAUNCHES, help="Engine launches (3+ for an interval)."
    ),
]
ProbesOpt = Annotated[
    int,
    typer.Option(
        "--probes",
        min=2,
        max=MAX_PROBES,
        help="Measured loads per launch (search, then boundary re-runs).",
    ),
]
StartOpt = Annotated[
    float | None, typer.Option("--start", help="First load tried (default: one step).")
]
MaxOpt = Annotated[
    float, typer.Option("--max", help="Largest load tried (meeting it means 'at least').")
]
StepOpt = Annotated[
    float | None,
    typer.Option("--step", help="Resolution of the answer (default 1 user, 0.5 req/s)."),
]
BSetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--b-set",
        help="Capacity A/B: arm B is the config with this KEY=VALUE too (repeatable); "
        "arm A is the config as given.",
    ),
]
SweepOpt = Annotated[
    str | None,
    typer.Option(
        "--sweep",
        metavar="KEY=V1,V2,...",
        help="Capacity as a sweep objective: the capacity of each value of one knob, "
        "launches round-robin; the best is compared with the runner-up.",
    ),
]
NoGuessOpt = Annotated[
    bool,
    typer.Option(
        "--no-guess",
        help="Search by doubling and bisection alone: never let the study model measure "
        "its predicted boundary first (once 3 probes are measured; docs/perf-model.md).",
    ),
]
BPresetOpt = Annotated[
    str | None, typer.Option("--b-preset", help="Capacity A/B: arm B starts from this preset.")
]


def register(app: typer.Typer) -> None:
    """Adds ``capacity`` to the tunelab CLI."""
    app.command("capacity")(capacity_command)


def capacity_command(
    ctx: typer.Context,
    slo: SloOpt,
    by: ByOpt = "concurrency",
    launches: LaunchesOpt = lab_capacity.LAUNCHES,
    probes: ProbesOpt = lab_capacity.PROBES,
    start: StartOpt = None,
    limit: MaxOpt = lab_capacity.LIMIT,
    step: StepOpt = None,
    preset: opt.PresetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
    allow_env: opt.AllowEnvOpt = None,
    set_items: opt.SetOpt = None,
    b_set: BSetOpt = None,
    b_preset: BPresetOpt = None,
    sweep: SweepOpt = None,
    model: opt.ModelOpt = None,
    input_len: opt.InputLenOpt = opt.DEFAULT_INPUT_LEN,
    output_len: opt.OutputLenOpt = opt.DEFAULT_OUTPUT_LEN,
    num_prompts: opt.NumPromptsOpt = opt.DEFAULT_NUM_PROMPTS,
    warmup: opt.WarmupOpt = opt.DEFAULT_WARMUP,
    seed: opt.SeedOpt = 0,
    confidence: ConfidenceOpt = 0.95,
    no_guess: NoGuessOpt = False,
    study: CapacityStudyOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Capacity under an SLO: the largest concurrency (or rate) meeting it, over N launches."""
    opt.grant_consent(allow_code, allow_env)
    try:
        target = plan_input.slo(slo)
        grid = lab_capacity.grid(by, start=start, limit=limit, step=step)
    except TunelabError as exc:
        raise opt.usage_error("capacity", with_fix(exc)) from None
    # The SLO's goodput bounds on each request come from the one owner the TUI uses too.
    typed = opt.make_workload(
        "capacity",
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        warmup=warmup,
        seed=seed,
    )
    # The preset's [workload] (a dataset, sessions, a trace) is what each probe sends; the
    # search sets the load (concurrency or rate) itself.
    base = lab_capacity.probe_base(opt.workload_over_preset("capacity", ctx, typed, preset), target)
    config = opt.make_config("capacity", preset, model, set_items)
    other = None
    if b_set or b_preset:
        other = _arm_b(b_preset or preset, model, set_items, b_set or [])
    swept = _sweep_param(sweep) if sweep is not None else None
    if swept is not None:
        try:
            lab_config.enforce_params(config, [swept])
        except lab_config.ConfigInputError as exc:
            raise opt.user_error("capacity", exc) from None
    try:
        plan = CapacityPlan(
            config,
            base,
            target,
            grid,
            study,
            b=other,
            sweep=swept,
            launches=launches,
            probes=probes,
            confidence=confidence,
            model=not no_guess,
        )
    except TunelabError as exc:
        raise opt.usage_error("capacity", with_fix(exc)) from None
    # `capacity` has no guard options: its probes run the default output guard.
    session = Session("capacity", store_path, startup_timeout, verbose, GuardSettings())
    hooks = Hooks(on_launch=None if as_json else _print_arm_launch)
    _finish(run_study(session, plan, hooks=hooks), plan, as_json)


def _arm_b(
    preset: str | None,
    model: str | None,
    set_items: list[str] | None,
    b_set: list[str],
) -> EngineConfig:
    """Arm B: its preset (or A's) with the shared --set items, then the --b-set items on top."""
    config = opt.make_config("capacity", preset, model, set_items)
    try:
        return lab_config.apply_items(config, b_set)
    except lab_config.ConfigInputError as exc:
        raise opt.usage_error("capacity", f"--b-set: {exc}") from None


def _sweep_param(text: str) -> Param:
    """``KEY=V1,V2,...`` as a swept knob with its values checked (usage error otherwise)."""
    try:
        return plan_input.swept_values(text)
    except TunelabError as exc:
        raise opt.usage_error("capacity", f"--sweep: {with_fix(exc)}") from None


def _finish(
    report: CapacityReport | CapacityAB | CapacitySweep, plan: CapacityPlan, as_json: bool
) -> None:
    """Prints the report (its shape is the plan's: a sweep, an A/B or one config); exit 1
    when nothing (or an arm) measured no capacity."""
    if plan.sweep is not None:
        _finish_sweep(cast("CapacitySweep", report), as_json)
        return
    if plan.b is not None:
        both = cast("CapacityAB", report)
        if as_json:
            typer.echo(dump(both.to_dict()))
        else:
            print_capacity(both.a, "A")
            print_capacity(both.b, "B")
            typer.echo(both.summary())
        if both.comparison is None:
            raise typer.Exit(1)
        return
    one = cast("CapacityReport", report)
    if as_json:
        typer.echo(dump(one.to_dict()))
    else:
        print_capacity(one)
    if one.interval is None:
        raise typer.Exit(1)


def _finish_sweep(report: CapacitySweep, as_json: bool) -> None:
    """The sweep's per-value table and its verdict; exit 1 when no value measured a capacity."""
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        for point in report.points:
            print_capacity(point.report, point.label)
        table = Table(title=f"capacity sweep of {markup(report.key)}", title_justify="left")
        for name in ("value", "capacity", "interval", "launches"):
            table.add_column(name)
        best = report.best
        for point in report.points:
            iv = point.report.interval
            mark = " ★" if best is not None and point is best else ""
            table.add_row(
                markup(f"{point.value}{mark}"),
                "-" if iv is None else f"{iv.mean:g}",
                "-" if iv is None or iv.low is None else f"[{iv.low:g}, {iv.high:g}]",
                markup(", ".join(f"{c:g}" for c in point.report.capacities) or "-"),
            )
        Console().print(table)
        typer.echo(report.summary())
    if report.best is None:
        raise typer.Exit(1)


def _print_launch(answer: LaunchCapacity) -> None:
    """One line per launch on stderr as it ends (a study can take a while)."""
    what = answer.failure or f"capacity {answer.capacity:g}"
    how = "" if answer.failure else f"; {answer.search_text()}"
    typer.echo(
        f"launch {answer.launch + 1}: {what}  (probes: {answer.probes_text()}{how})", err=True
    )


def _print_arm_launch(arm: str, answer: LaunchCapacity) -> None:
    """A launch's line, after its arm (A/B) or value (sweep) when the study has several."""
    if arm:
        typer.echo(f"{'arm ' if len(arm) == 1 else ''}{arm}, ", err=True, nl=False)
    _print_launch(answer)


def print_capacity(report: CapacityReport, arm: str | None = None) -> None:
    """The per-launch table and the one-line answer."""
    title = f"capacity — study {markup(report.study)}" + (f", arm {arm}" if arm else "")
    table = Table(title=title, title_justify="left")
    for name in ("launch", "capacity", "first miss", "probes (✗ missed, ◆ model)", "note"):
        table.add_column(name)
    for launch in report.launches:
        note = launch.failure or ("" if launch.converged else "out of probes")
        if launch.capped:
            note = "limit met"
        table.add_row(
            str(launch.launch + 1),
            f"{launch.capacity:g}" if launch.measured else "-",
            f"{launch.failing:g}" if launch.failing is not None else "-",
            markup(launch.probes_text()),
            markup(note),
        )
    console = Console()
    console.print(table)
    console.print(markup(report.summary()))
