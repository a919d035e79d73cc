"""The headless CLI: every action of the TUI as a command, for scripts.

Each command lives in its own module under ``tuner/cli/`` (a ``register(app)``
function defines it). The root group imports a command's module only when that
command is looked up, so ``tunelab bench`` loads the bench module and what it
needs and nothing of the other commands, and ``tunelab`` (the TUI) loads none
of them; a command module therefore imports at its top like any other module.
``tunelab --help`` lists every command and so loads them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup

from tuner import __version__

if TYPE_CHECKING:
    # Typer's own copy of Click: its groups take and give these, not the click package's.
    from typer import _click

# Command -> (the module of tuner/cli that defines it, the summary `tunelab --help`
# lists), in --help order. The summary is the command's docstring's first line;
# tests/test_cli_startup.py holds the two equal, so the listing needs no import.
COMMAND_TABLE: dict[str, tuple[str, str]] = {
    "doctor": (
        "doctor",
        "Python, tunelab, vLLM (version, platform, how it starts), GPUs and the demo model.",
    ),
    "demo-model": (
        "demo",
        "Create the tiny Llama model for the embedded CPU engine (if missing) and print its path.",
    ),
    "knobs": (
        "knobs",
        "List every knob tunelab knows, for the target vLLM version and platform.",
    ),
    "gpus": (
        "gpus",
        "Show GPU utilisation, VRAM, power, temperatures, clocks, partitions and processes.",
    ),
    "check": (
        "check",
        "Check a config against the rules for its target; exit 1 on errors, 2 on bad input.",
    ),
    "presets": ("presets", "List, show and check presets (shipped ones and your own)."),
    "export": (
        "export",
        "Export a trial or a preset as TOML, launch script, vLLM YAML and docker line.",
    ),
    "bench": ("bench", "Benchmark a running vLLM (or any OpenAI-compatible) server."),
    "run": (
        "run",
        "Run one trial: rules check, engine start, warm-up, measured run, stop; store the result.",
    ),
    "results": (
        "trials",
        "List stored trials: status, workload, objective, throughput, latency, output guard.",
    ),
    "show": (
        "trials",
        "Show one trial in full: config, workload, findings, results, telemetry, log path and "
        "tail.",
    ),
    "ab": (
        "studies",
        "A/B two configs: repeated, interleaved trials; per-metric interval and verdict.",
    ),
    "sweep": (
        "studies",
        "Sweep one knob over values (rest fixed); --descent moves on knob by knob keeping the "
        "best.",
    ),
    "tune": (
        "studies",
        "Search a space with Optuna under SLO constraints; resumable, and shareable between nodes.",
    ),
    "winner": (
        "studies",
        "The best trial of a study among those meeting the SLO, with its margin and guard verdict.",
    ),
    "capacity": (
        "capacity",
        "Capacity under an SLO: the largest concurrency (or rate) meeting it, over N launches.",
    ),
    "ablate": (
        "ablate",
        "Leave-one-out A/Bs of a winner's knobs; drops those inside the noise; the minimal preset.",
    ),
    "model": (
        "model",
        "A study's performance model: its accuracy on the study's trials, or a prediction.",
    ),
    "report": (
        "report",
        "Write report.html (self-contained, opens offline) and report.md for a study.",
    ),
    "profile": (
        "profile",
        "Why B is faster: two torch-profiler traces as time per output token by kernel family.",
    ),
    "jobs": (
        "jobs",
        "Detached work: start a tunelab command that outlives the terminal, list, follow, stop.",
    ),
}
COMMANDS: dict[str, str] = {name: module for name, (module, _) in COMMAND_TABLE.items()}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))

# The root's settings; a lazily loaded module's commands are built with the same.
SETTINGS = {"add_completion": False, "pretty_exceptions_enable": False, "rich_markup_mode": "rich"}


_LOADED: dict[str, TyperGroup] = {}


def _module_commands(module: str) -> TyperGroup:
    """The commands ``tuner.cli.<module>`` defines, imported and built once."""
    if module not in _LOADED:
        sub = typer.Typer(**SETTINGS)  # type: ignore[arg-type]
        importlib.import_module(f"tuner.cli.{module}").register(sub)
        _LOADED[module] = typer.main.get_group(sub)
    return _LOADED[module]


class LazyCommands(TyperGroup):
    """The root group: finds each command in its module the first time it is asked for.

    ``tunelab --help`` lists every command from the table's summaries, so the
    listing loads no command module (importing them all costs about 0.5 CPU-s).
    """

    _listing = False

    def list_commands(self, ctx: _click.Context) -> list[str]:
        eager = super().list_commands(ctx)
        return [*eager, *(name for name in COMMANDS if name not in eager)]

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in COMMANDS:
            return found
        module, summary = COMMAND_TABLE[cmd_name]
        if self._listing and module not in _LOADED:
            return TyperCommand(cmd_name, help=summary)  # a line of the listing, nothing to run
        return _module_commands(module).commands.get(cmd_name)

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


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
