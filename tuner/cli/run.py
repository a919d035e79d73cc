"""``tunelab run``: one trial, from the command line.

It builds a config (preset, ``--model``, ``--set``) and a workload from the
shared options (tuner.cli.options; with ``--preset``, the preset's ``[workload]`` with the
options typed over it), runs one trial with a live progress
display (tuner.cli.trial_progress) and the output-drift guard's options, and
stores it; the trial is then printed as ``tunelab show`` prints it. Exit
status 0 when it was measured, 1 when it failed or the rules skipped it, 2 for
input tunelab cannot use, 130 when interrupted (the engine is stopped and the
trial marked interrupted first).
"""

from __future__ import annotations

import asyncio
import json
import signal
from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli import options as opt
from tuner.cli import study_session
from tuner.cli.study_options import VerboseOpt
from tuner.cli.study_output import jsonable
from tuner.cli.trial_progress import TrialProgressDisplay
from tuner.cli.trials import print_trial
from tuner.trials.model import Trial, validate_objective

if TYPE_CHECKING:
    from tuner.guard.settings import GuardSettings
    from tuner.trials.store import TrialStore


def register(app: typer.Typer) -> None:
    """Adds ``run`` to the tunelab CLI."""
    app.command("run")(run_command)


def run_command(
    ctx: typer.Context,
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
    seed: opt.SeedOpt = 0,
    slo: opt.SloOpt = None,
    study: opt.StudyOpt = "default",
    objective: Annotated[
        str,
        typer.Option(
            "--objective", help="Result key that ranks trials, e.g. output_throughput, p99_ttft_ms."
        ),
    ] = "output_throughput",
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
    guard_prompts: opt.GuardPromptsOpt = None,
    guard_tokens: opt.GuardTokensOpt = None,
    no_guard: opt.NoGuardOpt = False,
) -> None:
    """Run one trial: rules check, engine start, warm-up, measured run, stop; store the result."""
    opt.grant_consent(allow_code, allow_env)
    wl = opt.WorkloadArgs(
        input_len, output_len, num_prompts, concurrency, request_rate, warmup, seed
    )
    workload = opt.workload_over_preset("run", ctx, wl.build("run", slo), preset)
    try:
        validate_objective(objective)
    except ValueError as exc:
        raise opt.usage_error("run", str(exc)) from None
    config = opt.make_config("run", preset, model, set_items)
    guard = opt.GuardArgs(no_guard, guard_prompts, guard_tokens).settings("run")
    store = opt.open_store("run", store_path)
    trial = Trial(config=config, workload=workload, study=study, objective=objective)
    try:
        asyncio.run(_run(trial, store, startup_timeout, verbose, guard))
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM (cancels the run)
        typer.echo(
            f"tunelab run: interrupted; trial {trial.short_id} is marked {trial.status}", err=True
        )
        raise typer.Exit(130) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps(jsonable(trial.to_dict()), indent=1))
    else:
        print_trial(trial, tail=trial.status.value == "failed")
    if trial.status.value != "done":
        raise typer.Exit(1)


async def _run(
    trial: Trial, store: TrialStore, startup_timeout: float, verbose: bool, guard: GuardSettings
) -> None:
    """Runs the trial with the display; SIGTERM cancels like Ctrl-C (engine stopped, trial interrupted)."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    with (
        TrialProgressDisplay(show_log=verbose) as display,
        study_session.node_runner(
            store,
            display,
            startup_timeout=startup_timeout,
            guard=guard,
        ) as runner,
    ):
        await runner.one(trial)
