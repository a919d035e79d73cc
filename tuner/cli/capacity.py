"""``tunelab capacity``: the largest load a config carries while an SLO holds, with its interval.

``tunelab capacity --slo 'p99_ttft_ms<=500' --by concurrency --launches 3``
searches one engine launch at a time (doubling, then bisection, as vLLM's
``vllm bench sweep serve_sla``) and prints the mean capacity over launches
with its t interval: "max concurrency meeting p99_ttft_ms<=500: 48 [44, 52]".
Every probe is a stored trial of the study (``tunelab results --study``).
Exit status: 0 when a capacity was measured, 1 when no launch measured one,
2 for input tunelab cannot use, 130 when interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli import options as opt

if TYPE_CHECKING:
    from tuner.studies.capacity import CapacityReport, LaunchCapacity

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


def register(app: typer.Typer) -> None:
    """Adds ``capacity`` to the tunelab CLI."""
    app.command("capacity")(capacity_command)


def capacity_command(
    slo: SloOpt,
    by: ByOpt = "concurrency",
    launches: Annotated[
        int, typer.Option("--launches", min=1, help="Engine launches (3+ for an interval).")
    ] = 3,
    probes: Annotated[
        int,
        typer.Option(
            "--probes", min=2, help="Measured loads per launch (search, then boundary re-runs)."
        ),
    ] = 10,
    start: Annotated[
        float | None, typer.Option("--start", help="First load tried (default: one step).")
    ] = None,
    limit: Annotated[
        float, typer.Option("--max", help="Largest load tried (meeting it means 'at least').")
    ] = 1024,
    step: Annotated[
        float | None,
        typer.Option("--step", help="Resolution of the answer (default 1 user, 0.5 req/s)."),
    ] = None,
    preset: opt.PresetOpt = None,
    allow_code: opt.AllowCodeOpt = False,
    set_items: opt.SetOpt = None,
    model: opt.ModelOpt = None,
    input_len: opt.InputLenOpt = opt.DEFAULT_INPUT_LEN,
    output_len: opt.OutputLenOpt = opt.DEFAULT_OUTPUT_LEN,
    num_prompts: opt.NumPromptsOpt = opt.DEFAULT_NUM_PROMPTS,
    warmup: opt.WarmupOpt = opt.DEFAULT_WARMUP,
    seed: opt.SeedOpt = 0,
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999)] = 0.95,
    study: Annotated[
        str | None, typer.Option("--study", help="Study name (default capacity-<time>).")
    ] = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Engine log lines.")] = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Capacity under an SLO: the largest concurrency (or rate) meeting it, over N launches."""
    from tuner.cli import studies
    from tuner.cli.study_output import StudyProgress, dump
    from tuner.studies.capacity import CapacityError, Grid
    from tuner.studies.capacity_run import run_capacity
    from tuner.studies.slo import SLOError, parse_slo

    try:
        target = parse_slo(slo)
        unit = step if step is not None else (1.0 if by == "concurrency" else 0.5)
        grid = Grid(by, unit, start if start is not None else unit, limit)  # type: ignore[arg-type]
    except (SLOError, CapacityError) as exc:
        raise opt.usage_error("capacity", _with_fix(exc)) from None
    base = opt.make_workload(
        "capacity",
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        warmup=warmup,
        seed=seed,
        slo=",".join(f"{k}:{v:g}" for k, v in target.goodput().items()) or None,
    )
    config = opt.make_config("capacity", preset, model, set_items, allow_code=allow_code)
    store = opt.open_store("capacity", store_path)
    try:
        with StudyProgress("capacity", launches * probes, show_log=verbose) as progress:
            runner = studies.make_runner(store, progress, startup_timeout)
            report = studies._run_async(
                "capacity",
                lambda: run_capacity(
                    config,
                    base,
                    target,
                    grid,
                    runner,
                    launches=launches,
                    probes=probes,
                    study=study,
                    confidence=confidence,
                    on_launch=None if as_json else _print_launch,
                ),
            )
    except CapacityError as exc:
        typer.echo(f"tunelab capacity: {_with_fix(exc)}", err=True)
        raise typer.Exit(exc.exit_code) from None
    finally:
        store.close()
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_capacity(report)
    if report.interval is None:
        raise typer.Exit(1)


def _with_fix(exc: Exception) -> str:
    fix = getattr(exc, "fix", None)
    return f"{exc} ({fix})" if fix else str(exc)


def _print_launch(answer: LaunchCapacity) -> None:
    """One line per launch on stderr as it ends (a study can take a while)."""
    loads = ", ".join(f"{p.value:g}{'' if p.met else '✗'}" for p in answer.probes)
    what = answer.failure or f"capacity {answer.capacity:g}"
    typer.echo(f"launch {answer.launch + 1}: {what}  (probes: {loads})", err=True)


def print_capacity(report: CapacityReport) -> None:
    """The per-launch table and the one-line answer."""
    from rich.console import Console
    from rich.table import Table

    from tuner.cli.safe_text import markup

    table = Table(title=f"capacity — study {markup(report.study)}", title_justify="left")
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
