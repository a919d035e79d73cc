"""The `tunelab` console script: the TUI with no command, the headless CLI otherwise.

The CLI's commands live in ``tuner.cli`` (no Textual there); this module adds
the ``tui`` command and opens the app when no command is given. Textual is
imported only when the app really opens, so ``tunelab --help`` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from tuner.cli.app import app, register_all


@app.command("tui")
def tui_command(
    model: str | None = typer.Option(None, "--model", "-m", help="Model id or path to start with."),
    preset: Path | None = typer.Option(None, "--preset", "-p", help="Preset TOML to start from."),
) -> None:
    """Open the TUI (also what `tunelab` with no command does)."""
    from tui.app import run_app

    run_app(model=model, preset=preset)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `tunelab` script."""
    args = list(sys.argv[1:] if argv is None else argv)
    register_all(app)
    if not args:
        args = ["tui"]
    app(args=args, prog_name="tunelab")


if __name__ == "__main__":
    main()
