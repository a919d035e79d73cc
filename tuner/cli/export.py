"""``tunelab export (TRIAL | --preset FILE)``: write a preset and what production launches.

From a trial, the config that was measured is exported with its workload,
results and trial id; from a preset file (or a shipped preset's name), the
preset is re-rendered to every format. Formats: ``toml`` (the preset),
``sh`` (the bash launch script), ``yaml`` (vLLM's ``--config`` file) and
``docker`` (a ``docker run`` script for the ROCm image). Everything is
rendered and checked before anything is written; existing files are kept
unless ``--force``. Exit status 2 for bad input, 1 when writing failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli.safe_text import clean
from tuner.errors import with_fix
from tuner.export.aiter_untuned import untuned_bundle, write_bundle
from tuner.export.catalog import open_preset
from tuner.export.errors import ExportError, PresetError
from tuner.export.render import dropped_secrets, export, parse_formats
from tuner.export.trial import preset_from_trial

if TYPE_CHECKING:
    from tuner.export.aiter_untuned import UntunedExport
    from tuner.export.preset import Preset


def register(app: typer.Typer) -> None:
    """Adds the ``export`` command to the tunelab CLI."""
    app.command("export")(export_command)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"tunelab export: {clean(message)}", err=True)
    return typer.Exit(code)


def export_command(
    trial: Annotated[
        str | None, typer.Argument(help="Trial id to export (see `tunelab trials`).")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option("--preset", help="A preset file, or the name of a shipped/user preset."),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Directory to write into (created if missing).")
    ] = Path("."),
    fmt: Annotated[
        str, typer.Option("--format", help="Comma-separated: toml, sh, yaml, docker.")
    ] = "toml,sh,yaml,docker",
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Base name of the files (default: the preset's name)."),
    ] = None,
    allow_env: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-env", help="Allow this otherwise refused environment variable (repeatable)."
        ),
    ] = None,
    allow_code: Annotated[
        bool,
        typer.Option(
            "--allow-code",
            help="Accept and export engine arguments that load or run code "
            "(trust-remote-code, tool-parser-plugin, ...): only for presets you trust.",
        ),
    ] = False,
    aiter_untuned: Annotated[
        bool,
        typer.Option(
            "--aiter-untuned",
            help="Only the kernel shapes the trial ran on AITER's default kernels: one CSV per "
            "family in AITER's untuned schema, and a script that runs AITER's tuners on them.",
        ),
    ] = False,
) -> None:
    """Export a trial or a preset as TOML, launch script, vLLM YAML and docker line."""
    if (trial is None) == (preset is None):
        raise _fail("give either a TRIAL id or --preset FILE (not both, not neither)")
    if aiter_untuned and trial is None:
        raise _fail(
            "--aiter-untuned exports what a trial's engine logged: give a TRIAL id "
            "(see `tunelab trials`), not --preset"
        )
    allowed = tuple(allow_env or ())
    if aiter_untuned:
        _export_untuned(trial or "", out, force, name)
        return
    try:
        formats = parse_formats(fmt)
        source = _from_preset(preset, allowed, allow_code) if preset else _from_trial(trial or "")
        bundle = untuned_bundle(trial, name or source.name, only=False) if trial else None
    except (PresetError, ExportError) as exc:
        raise _fail(with_fix(exc)) from None
    try:
        written = export(
            source,
            out,
            formats,
            force,
            name=name,
            allow_env=allowed,
            allow_code=allow_code,
            extra=bundle.files if bundle else (),
        )
    except ExportError as exc:  # 1 when writing failed, 2 for a name or path it cannot use
        raise _fail(with_fix(exc), exc.exit_code) from None
    _say_written(written, source, bundle)


def _say_written(written: list[Path], source: Preset, bundle: UntunedExport | None) -> None:
    """The paths written, then what the user must know: the AITER shapes, left-out secrets,
    how to launch."""
    for path in written:
        typer.echo(f"wrote {path}")
    if bundle and bundle.files:
        for line in bundle.notes():
            typer.echo(f"note: {clean(line)}", err=True)
    secrets = dropped_secrets(source)
    if secrets:
        typer.echo(
            f"note: left out {', '.join(secrets)}: secrets are never written; export them in the "
            "shell that runs the script",
            err=True,
        )
    scripts = [p for p in written if p.name.endswith(".sh")]
    scripts = [p for p in scripts if not p.name.endswith((".docker.sh", ".aiter-tune.sh"))]
    if scripts:
        typer.echo(
            f"launch: {scripts[0]}   (HOST/PORT override the bind address; extra flags go to vLLM)"
        )


def _export_untuned(trial_id: str, out: Path, force: bool, name: str | None) -> None:
    """``--aiter-untuned``: only the trial's untuned-shape CSVs and the tuning script."""
    try:
        bundle = untuned_bundle(trial_id, name, only=True)
        written = write_bundle(out, bundle, force)
    except ExportError as exc:
        raise _fail(with_fix(exc), exc.exit_code) from None
    for path in written:
        typer.echo(f"wrote {path}")
    for line in bundle.notes():
        typer.echo(f"note: {clean(line)}", err=True)


def _from_preset(name_or_path: str, allow_env: tuple[str, ...], allow_code: bool) -> Preset:

    preset, note = open_preset(name_or_path, allow_env=allow_env, allow_code=allow_code)
    if note:
        typer.echo(f"note: {clean(note)}", err=True)
    return preset


def _from_trial(trial_id: str) -> Preset:
    """The preset for a stored trial: its config, workload, results and provenance."""
    # Deferred for start-up time like every command's imports; tunelab's own module is
    # always there (issue 12: no ImportError guards around tunelab's own modules).

    return preset_from_trial(trial_id)
