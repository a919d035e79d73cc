"""``tunelab ablate TRIAL``: which of a winner's changed knobs matter, and the minimal preset.

Runs one leave-one-out A/B per knob the trial changes from its study's
baseline (or ``--baseline``), drops the knobs whose effect is inside the
noise (or that hurt), confirms the shorter config against the winner, and
writes it as a preset (``--output FILE`` or ``--output FOLDER``, else printed) whose
``[results.ablation.<knob>]`` tables carry each knob's measured effect and
interval, and whose ``[results]``/``[results.noise]`` are the minimal
config's own repeats, so ``tunelab presets verify`` can re-check it later.
Exit status: 0 when the ablation ran, 1 when the minimal config is
significantly worse than the winner (keep the winner), nothing was
measured or the preset could not be written where asked, 2 for input
tunelab cannot use, 130 when interrupted. ``--output`` is checked before the
first trial (:mod:`tuner.cli.result_file`); if writing still fails at the
end, the preset goes to tunelab's data folder (or the terminal) and the
message says where: hours of measurement are never lost to a bad path.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli import options as opt
from tuner.cli import result_file
from tuner.cli.study_options import AblateStudyOpt, ConfidenceOpt, GpusOpt, VerboseOpt
from tuner.cli.study_output import dump
from tuner.cli.study_session import Session, run_study
from tuner.errors import TunelabError
from tuner.export.preset import dump_preset
from tuner.guard.settings import GuardSettings
from tuner.lab import config as lab_config
from tuner.lab.ablation import minimal_preset
from tuner.lab.limits import MAX_REPEATS
from tuner.lab.plans import AblationPlan, Hooks
from tuner.lab.study import Study
from tuner.trials.model import TrialStatus
from tuner.trials.store import StoreError, TrialNotFound

if TYPE_CHECKING:
    from tuner.export.preset import Preset
    from tuner.studies.ablate import AblationReport, KnobEffect
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
    repeats: Annotated[
        int, typer.Option("--repeats", min=2, max=MAX_REPEATS, help="Launches per arm.")
    ] = 3,
    max_repeats: Annotated[
        int | None,
        typer.Option(
            "--max-repeats",
            min=2,
            max=MAX_REPEATS,
            help="Sequential A/Bs: stop each once it is clear.",
        ),
    ] = None,
    confidence: ConfidenceOpt = 0.95,
    confirm: Annotated[
        bool,
        typer.Option("--confirm/--no-confirm", help="A/B the minimal config against the winner."),
    ] = True,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the minimal preset here (a file or a folder)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing --output file.")
    ] = False,
    gpus: GpusOpt = None,
    study: AblateStudyOpt = None,
    allow_code: opt.AllowCodeOpt = False,
    allow_env: opt.AllowEnvOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Leave-one-out A/Bs of a winner's knobs; drops those inside the noise; the minimal preset."""
    opt.grant_consent(allow_code, allow_env)
    store = opt.open_store("ablate", store_path)
    try:
        winner, baseline = _pair(store, trial_id, baseline_id)
        try:
            plan = AblationPlan(winner, baseline, study, repeats, max_repeats, confidence, confirm)
        except TunelabError as exc:
            raise opt.usage_error("ablate", f"{exc} ({exc.fix})") from None
        destination = _destination(output, winner, force)  # before the first trial runs
        session = Session("ablate", store_path, startup_timeout, verbose, GuardSettings())
        hooks = Hooks(on_knob=None if as_json else _print_knob)
        report = run_study(session, plan, hooks=hooks, gpus=gpus, store=store)
    finally:
        store.close()
    _finish(report, winner, destination, force, as_json)


def _finish(
    report: AblationReport, winner: Trial, destination: Path | None, force: bool, as_json: bool
) -> None:
    """Writes (or prints) the minimal preset and the summary; exit 1 unless it is confirmed."""
    text = _preset_text(minimal_preset(report, winner))
    saved = _save(destination, text, force)
    if as_json:
        where = str(saved.path) if saved.path else text
        note = {"preset_note": saved.note} if saved.note else {}
        typer.echo(dump({**report.to_dict(), "preset": where, **note}))
    else:
        typer.echo(report.summary())
        if saved.note:
            typer.echo(f"tunelab ablate: {saved.note}", err=True)
        if saved.path is not None:
            typer.echo(f"minimal preset written to {saved.path}")
        else:
            typer.echo(text, nl=False)
    if (
        saved.note
        or not report.confirmed
        or not any(e.report.objective_row for e in report.effects)
    ):
        raise typer.Exit(1)


def _pair(store: TrialStore, trial_id: str, baseline_id: str | None) -> tuple[Trial, Trial]:
    """The winner and its baseline from the store (usage errors for unknown or unfinished ones,
    or for configs the policy refuses: a store is input too)."""
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
    for trial in (winner, baseline):  # stored configs meet the policy like typed ones
        try:
            lab_config.enforce_policy(trial.config)
        except lab_config.ConfigInputError as exc:
            raise opt.user_error("ablate", exc) from None
    return winner, baseline


def _destination(output: Path | None, winner: Trial, force: bool) -> Path | None:
    """The file ``--output`` means, checked before the run (exit 2 with a fix if unusable)."""
    if output is None:
        return None
    try:
        return result_file.plan(output, f"minimal-{winner.short_id}.toml", force=force)
    except result_file.ResultFileError as exc:
        raise opt.user_error("ablate", exc) from None


def _save(destination: Path | None, text: str, force: bool) -> result_file.Saved:
    """The preset written to ``destination`` (or a fallback); ``Saved(None)`` means print it."""
    if destination is None:
        return result_file.Saved(None)
    return result_file.save(destination, text, force=force, what="minimal preset")


def _print_knob(effect: KnobEffect) -> None:
    typer.echo(effect.describe(), err=True)


def _preset_text(preset: Preset) -> str:

    return dump_preset(preset)
