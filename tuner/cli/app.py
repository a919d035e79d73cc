"""The headless CLI: every action of the TUI as a command, for scripts.

Each command lives in its own module under ``tuner/cli/`` (a ``register(app)``
function defines it). The root group imports a command's module only when that
command is looked up, so ``tunelab bench`` loads the bench module and what it
needs and nothing of the other commands, and ``tunelab`` (the TUI) loads none
of them; a command module therefore imports at its top like any other module.
``tunelab --help`` lists every command and so loads them all.
"""

from __future__ import annotations

import functools
import importlib

import click
import typer
import typer.main
from typer.core import TyperGroup

from tuner import __version__

# Command -> the module of tuner/cli that defines it, in --help order.
COMMANDS: dict[str, str] = {
    "doctor": "doctor",
    "demo-model": "demo",
    "knobs": "knobs",
    "gpus": "gpus",
    "check": "check",
    "presets": "presets",
    "export": "export",
    "bench": "bench",
    "run": "run",
    "results": "trials",
    "show": "trials",
    "ab": "studies",
    "sweep": "studies",
    "tune": "studies",
    "winner": "studies",
    "capacity": "capacity",
    "ablate": "ablate",
    "report": "report",
    "jobs": "jobs",
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))

# The root's settings; a lazily loaded module's commands are built with the same.
SETTINGS = {"add_completion": False, "pretty_exceptions_enable": False, "rich_markup_mode": "rich"}


@functools.cache
def _module_commands(module: str) -> click.Group:
    """The commands ``tuner.cli.<module>`` defines, imported and built once."""
    sub = typer.Typer(**SETTINGS)  # type: ignore[arg-type]
    importlib.import_module(f"tuner.cli.{module}").register(sub)
    return typer.main.get_group(sub)


class LazyCommands(TyperGroup):
    """The root group: finds each command in its module the first time it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        eager = super().list_commands(ctx)
        return [*eager, *(name for name in COMMANDS if name not in eager)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in COMMANDS:
            found = _module_commands(COMMANDS[cmd_name]).commands.get(cmd_name)
        return found


app = typer.Typer(
    name="tunelab",
    help="A terminal tuning lab for vLLM. With no command, opens the TUI.",
    no_args_is_help=False,
    cls=LazyCommands,
    **SETTINGS,  # type: ignore[arg-type]
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
    """Define every command on ``target`` now (tests drive the CLI this way; `tunelab` needn't)."""
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"tuner.cli.{name}")
        module.register(target)
    return target
