"""The `tunelab` console script: the TUI with no command, the headless CLI otherwise.

The CLI's commands live in ``tuner.cli`` (no Textual there); this module adds
the ``tui`` command and opens the app when no command is given. Textual is
imported only when the app really opens, and a command's module only when that
command runs (tuner.cli.app.LazyCommands), so neither slows the other's start.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from tuner.cli.app import app
from tuner.cli.consent_options import AllowCodeOpt, AllowEnvOpt, grant_consent
from tuner.crash import run_guarded


@app.command("tui")
def tui_command(
    model: str | None = typer.Option(None, "--model", "-m", help="Model id or path to start with."),
    preset: Path | None = typer.Option(
        None, "--preset", "-p", help="Preset to start from: a TOML file or a preset's name."
    ),
    allow_code: AllowCodeOpt = False,
    allow_env: AllowEnvOpt = None,
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help="Preview another node: judge the config for this GPU (MI300X, 8xH100, "
        "MI300X-CPX; as `check --gpu`). Runs still run here.",
    ),
    platform: str | None = typer.Option(
        None, "--platform", help="Preview: the target platform (rocm, cuda, cpu)."
    ),
    vllm_version: str | None = typer.Option(
        None,
        "--vllm-version",
        help="Preview: the target vLLM version (default: tunelab's tables').",
    ),
) -> None:
    """Open the TUI (also what `tunelab` with no command does)."""
    from tuner.lab.target import preview as build_preview

    target = None
    if gpu or platform or vllm_version:
        target = build_preview(gpu, platform, vllm_version)  # a TunelabError: message + fix
    # Imported here for start-up time: Textual loads only when the TUI opens.
    from tui.guard import run_tui

    grant_consent(allow_code, allow_env)  # for every run and job this TUI starts
    run_tui(model=model, preset=preset, preview=target)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tunelab` script, under the one top-level handler.

    A TunelabError prints its message and fix (exit 2 or 1), Ctrl-C exits 130,
    any other exception writes a crash report and exits 70 (tuner.crash);
    Typer's usage errors and ``typer.Exit`` keep their own output and codes.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["tui"]
    code = run_guarded(lambda: app(args=args, prog_name="tunelab"), args)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    main()
