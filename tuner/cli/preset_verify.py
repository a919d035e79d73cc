"""``tunelab presets verify FILE``: re-run a preset's stored workload here and gate on a regression.

Loads the preset (its config, ``[workload]`` and ``[results]``), runs the
workload on ``--repeats`` fresh engine launches of the config on this node and
vLLM, and compares them with the stored objective and its ``[results.noise]``
(:mod:`tuner.studies.verify`). It also lists what differs between the
environment the preset records and this one (vLLM version, platform, GPU...),
since a regression after an upgrade is explained there first.

Exit status: 0 when the preset holds (no significant regression; an
improvement passes too), 1 on a significant regression or when no fresh run
finished (for CI: both fail the gate; the message says which), 2 for input
tunelab cannot use (no file, no ``[workload]``/``[results]``, a workload out of
tuner.bench.workload's bounds, or a dataset file it names that cannot be read:
that file is read through tuner.bounded and checked before any engine starts),
130 when interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli import options as opt
from tuner.cli.study_input import parse_fraction
from tuner.cli.study_options import ConfidenceOpt, GpusOpt, VerboseOpt, VerifyStudyOpt
from tuner.cli.study_output import dump
from tuner.cli.study_session import Session, run_study
from tuner.environment import differences_from_preset
from tuner.errors import TunelabError
from tuner.guard.settings import GuardSettings
from tuner.lab import config as lab_config
from tuner.lab.limits import MAX_REPEATS
from tuner.lab.plans import VerifyPlan

if TYPE_CHECKING:
    from tuner.studies.verify import VerifyReport


def verify_command(
    file: Annotated[str, typer.Argument(help="Preset file (or the name of a user preset).")],
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats", min=2, max=MAX_REPEATS, help="Fresh engine launches (2+ for an interval)."
        ),
    ] = 3,
    tolerance: Annotated[
        str,
        typer.Option(
            "--tolerance",
            help="A regression smaller than this is not a failure, e.g. 5% (default 0%: any "
            "significant regression fails).",
        ),
    ] = "0%",
    confidence: ConfidenceOpt = 0.95,
    allow_code: opt.AllowCodeOpt = False,
    allow_env: opt.AllowEnvOpt = None,
    gpus: GpusOpt = None,
    study: VerifyStudyOpt = None,
    startup_timeout: opt.StartupTimeoutOpt = 600.0,
    store_path: opt.StoreOpt = None,
    verbose: VerboseOpt = False,
    as_json: opt.JsonOpt = False,
) -> None:
    """Re-run the preset's \\[workload] here; exit 1 on a significant regression vs its \\[results]."""
    opt.grant_consent(allow_code, allow_env)
    margin = 0.0 if tolerance.strip() in ("0", "0%") else None
    if margin is None:
        margin = parse_fraction("presets verify", "--tolerance", tolerance) or 0.0
    try:
        preset = lab_config.load(file).preset
        plan = VerifyPlan.of_preset(
            preset,
            study,
            repeats=repeats,
            confidence=confidence,
            tolerance=margin,
            environment=tuple(_environment_differences(preset)),
        )
    except TunelabError as exc:
        raise opt.user_error("presets verify", exc) from None
    session = Session("presets verify", store_path, startup_timeout, verbose, GuardSettings())
    report = run_study(session, plan, gpus=gpus)
    if as_json:
        typer.echo(dump(report.to_dict()))
    else:
        print_verify(report)
    if report.failed:
        raise typer.Exit(1)


def _environment_differences(preset: object) -> list[str]:
    """What differs between the preset's recorded environment and this node (empty: unknown)."""
    return differences_from_preset(preset)


def print_verify(report: VerifyReport) -> None:
    """The verdict line, the fresh runs, and the environment's differences."""
    typer.echo(f"preset {report.preset}: {report.summary()}")
    typer.echo(f"  fresh runs: {', '.join(f'{v:.4g}' for v in report.fresh) or 'none'}")
    for failure in report.failures:
        typer.echo(f"  not measured: {failure}")
    if report.environment:
        typer.echo("  environment differs from the preset's:")
        for line in report.environment:
            typer.echo(f"    {line}")
    typer.echo(f"  trials in study {report.study} (`tunelab results --study {report.study}`)")
