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

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli import options as opt
from tuner.cli import study_session
from tuner.cli.safe_text import markup
from tuner.cli.study_output import dump
from tuner.errors import with_fix
from tuner.lab import capacity as lab_capacity
from tuner.lab import config as lab_config
from tuner.lab.limits import MAX_LAUNCHES, MAX_PROBES
from tuner.studies.capacity import CapacityAB, CapacityError, Grid
from tuner.studies.capacity_run import run_capacity, run_capacity_ab
from tuner.studies.capacity_sweep import CapacitySweep, run_capacity_sweep
from tuner.studies.slo import SLOError, parse_slo
from tuner.studies.space import Param, SpaceError, parse_param

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.capacity import CapacityReport, LaunchCapacity
    from tuner.studies.slo import SLO

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
BPresetOpt = Annotated[
    str | None, typer.Option("--b-preset", help="Capacity A/B: arm B starts from this preset.")
]
ConfidenceOpt = Annotated[float, typer.Option("--confidence", min=0.5, max=0.999)]
StudyOpt = Annotated[
    str | None, typer.Option("--study", help="Study name (default capacity-<time>).")
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Engine log lines.")]


@dataclass(frozen=True)
class _Plan:
    """What a capacity command runs: the config(s), workload, SLO, grid and counts."""

    a: EngineConfig
    b: EngineConfig | None
    sweep: Param | None
    base: Workload
    slo: SLO
    grid: Grid
    launches: int
    probes: int
    study: str | None
    confidence: float


def register(app: typer.Typer) -> None:
    """Adds ``capacity`` to the tunelab CLI."""
    app.command("capacity")(capacity_command)


def capacity_command(
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
    study: StudyOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Capacity under an SLO: the largest concurrency (or rate) meeting it, over N launches."""
    opt.grant_consent(allow_code, allow_env)
    try:
        target = parse_slo(slo)
        grid = lab_capacity.grid(by, start=start, limit=limit, step=step)
        lab_capacity.check_plan(grid, launches=launches, probes=probes)
    except (SLOError, CapacityError) as exc:
        raise opt.usage_error("capacity", with_fix(exc)) from None
    # The SLO's goodput bounds on each request come from the one owner the TUI uses too.
    base = lab_capacity.probe_base(
        opt.make_workload(
            "capacity",
            input_len=input_len,
            output_len=output_len,
            num_prompts=num_prompts,
            warmup=warmup,
            seed=seed,
        ),
        target,
    )
    config = opt.make_config("capacity", preset, model, set_items)
    other = None
    if sweep is not None and (b_set or b_preset):
        raise opt.usage_error("capacity", "--sweep and --b-set/--b-preset: choose one")
    if b_set or b_preset:
        other = _arm_b(b_preset or preset, model, set_items, b_set or [])
    swept = _sweep_param(sweep) if sweep is not None else None
    if swept is not None:
        try:
            lab_config.enforce_params(config, [swept])
        except lab_config.ConfigInputError as exc:
            raise opt.user_error("capacity", exc) from None
    plan = _Plan(config, other, swept, base, target, grid, launches, probes, study, confidence)
    _finish(_run(plan, store_path, startup_timeout, verbose, as_json), as_json)


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
        param = parse_param(text)
        param.values()
    except SpaceError as exc:
        raise opt.usage_error("capacity", f"--sweep: {with_fix(exc)}") from None
    if param.kind != "categorical":
        raise opt.usage_error(
            "capacity", f"--sweep takes listed values (KEY=V1,V2,...), not a range: {text!r}"
        )
    if len(param.values()) < 2:
        raise opt.usage_error(
            "capacity", f"--sweep needs two or more values of {param.key}: {param.key}=V1,V2"
        )
    return param


def _run(
    plan: _Plan, store_path: str | None, startup_timeout: float, verbose: bool, quiet: bool
) -> CapacityReport | CapacityAB | CapacitySweep:
    """Runs the capacity study (or capacity A/B or sweep) with the study progress display."""
    arms = 2 if plan.b is not None else len(plan.sweep.values()) if plan.sweep else 1
    kwargs: dict[str, Any] = {
        "launches": plan.launches,
        "probes": plan.probes,
        "study": plan.study,
        "confidence": plan.confidence,
    }
    total = arms * plan.launches * plan.probes
    try:
        with study_session.study_runner(
            "capacity",
            store_path,
            "capacity",
            total,
            verbose=verbose,
            startup_timeout=startup_timeout,
        ) as (_, runner):
            if plan.sweep is not None:
                key, values = plan.sweep.key, list(plan.sweep.values())
                sweep = partial(
                    run_capacity_sweep, plan.a, key, values, plan.base, plan.slo, plan.grid, runner
                )
                kwargs["on_launch"] = None if quiet else _print_arm_launch
                return study_session.run_async("capacity", lambda: sweep(**kwargs))
            if plan.b is None:
                one = partial(run_capacity, plan.a, plan.base, plan.slo, plan.grid, runner)
                kwargs["on_launch"] = None if quiet else _print_launch
                return study_session.run_async("capacity", lambda: one(**kwargs))
            ab = partial(run_capacity_ab, plan.a, plan.b, plan.base, plan.slo, plan.grid, runner)
            kwargs["on_launch"] = None if quiet else _print_arm_launch
            return study_session.run_async("capacity", lambda: ab(**kwargs))
    except CapacityError as exc:
        typer.echo(f"tunelab capacity: {with_fix(exc)}", err=True)
        raise typer.Exit(exc.exit_code) from None


def _finish(report: CapacityReport | CapacityAB | CapacitySweep, as_json: bool) -> None:
    """Prints the report; exit 1 when nothing (or an arm) measured no capacity."""
    if isinstance(report, CapacitySweep):
        _finish_sweep(report, as_json)
        return
    if as_json:
        typer.echo(dump(report.to_dict()))
    elif isinstance(report, CapacityAB):
        print_capacity(report.a, "A")
        print_capacity(report.b, "B")
        typer.echo(report.summary())
    else:
        print_capacity(report)
    measured = report.comparison if isinstance(report, CapacityAB) else report.interval
    if measured is None:
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
    loads = ", ".join(f"{p.value:g}{'' if p.met else '✗'}" for p in answer.probes)
    what = answer.failure or f"capacity {answer.capacity:g}"
    typer.echo(f"launch {answer.launch + 1}: {what}  (probes: {loads})", err=True)


def _print_arm_launch(arm: str, answer: LaunchCapacity) -> None:
    typer.echo(f"{'arm ' if len(arm) == 1 else ''}{arm}, ", err=True, nl=False)
    _print_launch(answer)


def print_capacity(report: CapacityReport, arm: str | None = None) -> None:
    """The per-launch table and the one-line answer."""
    title = f"capacity — study {markup(report.study)}" + (f", arm {arm}" if arm else "")
    table = Table(title=title, title_justify="left")
    for name in ("launch", "capacity", "first miss", "probes (✗ = missed)", "note"):
        table.add_column(name)
    for launch in report.launches:
        note = launch.failure or ("" if launch.converged else "out of probes")
        if launch.capped:
            note = "limit met"
        table.add_row(
            str(launch.launch + 1),
            f"{launch.capacity:g}" if launch.measured else "-",
            f"{launch.failing:g}" if launch.failing is not None else "-",
            markup(", ".join(f"{p.value:g}{'' if p.met else '✗'}" for p in launch.probes)),
            markup(note),
        )
    console = Console()
    console.print(table)
    console.print(markup(report.summary()))
