"""``tunelab ablate TRIAL``: which of a winner's changed knobs matter, and the minimal preset.

Runs one leave-one-out A/B per knob the trial changes from its study's
baseline (or ``--baseline``), drops the knobs whose effect is inside the
noise (or that hurt), confirms the shorter config against the winner, and
writes it as a preset (``--output FILE``, else printed) whose
``[results.ablation.<knob>]`` tables carry each knob's measured effect and
interval, and whose ``[results]``/``[results.noise]`` are the minimal
config's own repeats, so ``tunelab presets verify`` can re-check it later.
Exit status: 0 when the ablation ran, 1 when the minimal config is
significantly worse than the winner (keep the winner) or nothing was
measured, 2 for input tunelab cannot use, 130 when interrupted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli import options as opt
from tuner.cli import study_session
from tuner.cli.study_options import GpusOpt, VerboseOpt
from tuner.cli.study_output import dump
from tuner.export.preset import dump_preset
from tuner.lab.ablation import minimal_preset
from tuner.lab.study import Study
from tuner.studies.ablate import AblateError, changed_knobs, run_ablation
from tuner.trials.model import TrialStatus
from tuner.trials.store import StoreError, TrialNotFound

if TYPE_CHECKING:
    from tuner.export.preset import Preset
    from tuner.studies.ablate import KnobEffect
    from tuner.trials.model import Trial
    from tuner.trials.store import TrialStore


def register(app: typer.Typer) -> None:
    """Adds ``ablate`` to the tunelab CLI."""
    app.command("ablate")(ablate_command)


def ablate_command(
    trial_id: Annotated[str, typer.Argument(metavar="TRIAL", help="The winner (id or prefix).")],
    baseline_id: Annotated[
        str | None,
        typer.Option("--baseline", help="Trial to ablate towards (default: the study's baseline)."),
    ] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=2, help="Launches per arm.")] = 3,
    max_repeats: Annotated[
        int | None,
        typer.Option("--max-repeats", min=2, help="Sequential A/Bs: stop each once it is clear."),
    ] = None,
    confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999)] = 0.95,
    confirm: Annotated[
        bool,
        typer.Option("--confirm/--no-confirm", help="A/B the minimal config against the winner."),
    ] = True,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the minimal preset here.")
    ] = None,
    gpus: GpusOpt = None,
    study: Annotated[
        str | None, typer.Option("--study", help="Study name prefix (default ablate-<time>).")
    ] = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Leave-one-out A/Bs of a winner's knobs; drops those inside the noise; the minimal preset."""
    store = opt.open_store("ablate", store_path)
    try:
        winner, baseline = _pair(store, trial_id, baseline_id)
        try:
            knobs = changed_knobs(baseline.config, winner.config)
        except AblateError as exc:
            raise opt.usage_error("ablate", f"{exc} ({exc.fix})") from None
        planned = 2 * repeats * (len(knobs) + (1 if confirm else 0))
        with study_session.runner_on(
            store,
            "ablate",
            planned,
            verbose=verbose,
            startup_timeout=startup_timeout,
            prepare=lambda runner: study_session.use_gpus("ablate", runner, gpus),
        ) as runner:
            report = study_session.run_async(
                "ablate",
                lambda: run_ablation(
                    winner,
                    baseline,
                    runner,
                    repeats=repeats,
                    max_repeats=max_repeats,
                    confidence=confidence,
                    confirm=confirm,
                    study=study,
                    on_knob=None if as_json else _print_knob,
                ),
            )
    except AblateError as exc:
        raise opt.usage_error("ablate", f"{exc} ({exc.fix})") from None
    finally:
        store.close()
    preset = minimal_preset(report, winner)
    text = _preset_text(preset)
    if output is not None:
        output.write_text(text, encoding="utf-8")
    if as_json:
        typer.echo(dump({**report.to_dict(), "preset": str(output) if output else text}))
    else:
        typer.echo(report.summary())
        typer.echo(f"minimal preset written to {output}" if output else text, nl=output is not None)
    if not report.confirmed or not any(e.report.objective_row for e in report.effects):
        raise typer.Exit(1)


def _pair(store: TrialStore, trial_id: str, baseline_id: str | None) -> tuple[Trial, Trial]:
    """The winner and its baseline from the store (usage errors for unknown or unfinished ones)."""
    try:
        winner = store.get(trial_id)
        if baseline_id is not None:
            baseline = store.get(baseline_id)
        else:
            found = Study(store, winner.study).baseline()
            if found is None or found.trial.id == winner.id:
                raise opt.usage_error(
                    "ablate",
                    f"study {winner.study!r} has no other finished trial to be the baseline; "
                    "give --baseline TRIAL",
                )
            baseline = found.trial
    except (TrialNotFound, StoreError) as exc:
        raise opt.usage_error("ablate", str(exc)) from None
    if winner.status is not TrialStatus.DONE:
        raise opt.usage_error(
            "ablate", f"trial {winner.short_id} is {winner.status}: ablate a finished trial"
        )
    return winner, baseline


def _print_knob(effect: KnobEffect) -> None:
    typer.echo(effect.describe(), err=True)


def _preset_text(preset: Preset) -> str:

    return dump_preset(preset)
