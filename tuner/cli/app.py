"""The headless CLI: every action of the TUI as a command, for scripts.

Each command lives in its own module under ``tuner/cli/`` and registers
itself here; heavy imports stay inside the command functions so that
``tunelab --help`` starts in well under a second.
"""

from __future__ import annotations

import importlib

import typer

from tuner import __version__

app = typer.Typer(
    name="tunelab",
    help="A terminal tuning lab for vLLM. With no command, opens the TUI.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

# Command modules, in --help order. Each defines `register(app)`.
COMMAND_MODULES: tuple[str, ...] = (
    "doctor",
    "demo",
    "knobs",
    "gpus",
    "check",
    "presets",
    "export",
    "bench",
    "trials",
    "studies",
    "capacity",
    "ablate",
    "report",
    "jobs",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tunelab {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """tunelab: tune vLLM on a GPU node from one screen, or headless from scripts."""


def register_all(target: typer.Typer) -> typer.Typer:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"tuner.cli.{name}")
        module.register(target)
    return target
