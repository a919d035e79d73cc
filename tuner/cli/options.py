"""Options shared by the commands that run trials (run, ab, sweep, tune) and how they become objects.

Typer has no option groups, so each shared option is an ``Annotated`` alias a
command declares as a parameter, and the builders here turn the values into
a ``Workload``, an ``EngineConfig`` and an open ``TrialStore``. Bad input ends
the command with status 2 and one line saying what to fix; nothing is run or
written first.

The workload options are not declared here: each is derived from its entry in
:data:`tuner.lab.workload.FIELDS` (the declaration the TUI's workload panel
also reads), and the config and workload are built by ``tuner.lab`` — the
same functions the TUI calls, so both faces accept the same values.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from tuner.bench.workload import Workload, WorkloadError
from tuner.cli.consent_options import AllowCodeOpt as AllowCodeOpt
from tuner.cli.consent_options import AllowEnvOpt as AllowEnvOpt
from tuner.cli.consent_options import grant_consent as grant_consent
from tuner.config import EngineConfig
from tuner.cpu_demo import demo_config
from tuner.errors import TunelabError
from tuner.guard.probes import DEFAULT_GUARD_TOKENS
from tuner.guard.settings import MAX_GUARD_TOKENS, GuardSettings
from tuner.introspect import IntrospectError, introspect
from tuner.lab import config as lab_config
from tuner.lab.limits import MAX_STARTUP_TIMEOUT_S
from tuner.lab.run import guard_settings
from tuner.lab.workload import (
    BY_NAME,
    OPTION_FIELDS,
    WorkloadField,
    over_preset_workload,
    workload_from_texts,
)
from tuner.trials.store import StoreError, TrialStore


def workload_option(name: str) -> Any:
    """The Typer option of workload field ``name`` (flag, help and minimum from the declaration)."""
    field: WorkloadField = BY_NAME[name]
    if field.kind in ("count", "optional-count"):
        return typer.Option(field.flag, min=field.minimum, help=field.help)
    return typer.Option(field.flag, help=field.help)


# -- config ----------------------------------------------------------------------
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="Preset to start from (its model, env and engine args): a .toml file or the "
        "name of a shipped/user preset (`tunelab presets list`).",
    ),
]
# --allow-code/--allow-env live in a module of their own: light commands (jobs) take them too.
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="KEY=VALUE knob value (repeatable), e.g. --set max-num-seqs=32."),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model id (org/name) or local path; `tunelab:demo` is the built-in tiny model. "
        "Default: the preset's, else the demo model with the CPU-engine config when there is no GPU.",
    ),
]
# -- workload --------------------------------------------------------------------
InputLenOpt = Annotated[int, workload_option("input_len")]
OutputLenOpt = Annotated[int, workload_option("output_len")]
NumPromptsOpt = Annotated[int, workload_option("num_prompts")]
ConcurrencyOpt = Annotated[int | None, workload_option("concurrency")]
RequestRateOpt = Annotated[str, workload_option("request_rate")]
WarmupOpt = Annotated[
    int, typer.Option("--warmup", min=0, help="Warm-up requests before measuring.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for prompts and arrival times.")]
SloOpt = Annotated[str | None, workload_option("slo")]
# -- study / output --------------------------------------------------------------
StudyOpt = Annotated[str, typer.Option("--study", help="Study the trial(s) belong to.")]
StudyFilterOpt = Annotated[str | None, typer.Option("--study", help="Only this study's trials.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of tables.")]
StoreOpt = Annotated[
    str | None,
    typer.Option("--store", help="Trial store (SQLite file); default: tunelab's data dir."),
]
StartupTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--startup-timeout",
        min=1.0,
        max=MAX_STARTUP_TIMEOUT_S,
        help="Seconds the engine may take to become healthy.",
    ),
]

# -- output-drift guard (issue 16; tuner.guard.settings) --------------------------
GuardPromptsOpt = Annotated[
    Path | None,
    typer.Option(
        "--guard-prompts",
        metavar="FILE",
        help="Probe prompts of the output-drift guard: one per line, or a JSON list of "
        "strings (default: tunelab's built-in set).",
    ),
]
GuardTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--guard-tokens",
        metavar="N",
        help=f"Greedy tokens per guard probe, 1..{MAX_GUARD_TOKENS} "
        f"(default {DEFAULT_GUARD_TOKENS}).",
    ),
]
NoGuardOpt = Annotated[
    bool,
    typer.Option(
        "--no-guard",
        help="Skip the output-drift guard (greedy probes after each measured run, compared "
        "with the study baseline's outputs).",
    ),
]

DEFAULT_INPUT_LEN = int(BY_NAME["input_len"].cli_default or 128)
DEFAULT_OUTPUT_LEN = int(BY_NAME["output_len"].cli_default or 128)
DEFAULT_NUM_PROMPTS = int(BY_NAME["num_prompts"].cli_default or 64)
DEFAULT_WARMUP = 2


def usage_error(command: str, message: str) -> typer.Exit:
    """Prints ``tunelab COMMAND: message`` to stderr and returns the exit (status 2) to raise."""
    typer.echo(f"tunelab {command}: {message}", err=True)
    return typer.Exit(2)


def user_error(command: str, exc: TunelabError) -> typer.Exit:
    """Prints ``tunelab COMMAND: message`` and its fix to stderr; returns the exit to raise."""
    typer.echo(f"tunelab {command}: {exc.message}", err=True)
    if exc.fix:
        typer.echo(f"fix: {exc.fix}", err=True)
    return typer.Exit(exc.exit_code)


@dataclass(frozen=True)
class GuardArgs:
    """The guard options of one command (``--no-guard``, ``--guard-prompts``, ``--guard-tokens``)."""

    no_guard: bool = False
    prompts: Path | None = None
    tokens: int | None = None

    def settings(self, command: str) -> GuardSettings:
        """The guard settings, by tuner.lab.run.guard_settings (the prompts file is read here,
        before any engine starts); a bad file or count exits with status 2 and the fix.
        """
        # Deferred: tuner.lab.run loads the studies stack (~0.4 s), only for a command that runs.

        if self.no_guard and (self.prompts is not None or self.tokens is not None):
            raise usage_error(
                command, "--no-guard turns the guard off: drop --guard-prompts/--guard-tokens"
            )
        try:
            return guard_settings(self.prompts, self.tokens, enabled=not self.no_guard)
        except TunelabError as exc:
            raise user_error(command, exc) from None


def make_workload(
    command: str,
    *,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    num_prompts: int = DEFAULT_NUM_PROMPTS,
    concurrency: int | None = None,
    request_rate: str = "inf",
    warmup: int = DEFAULT_WARMUP,
    seed: int = 0,
    slo: str | None = None,
) -> Workload:
    """The workload from the shared options (tuner.lab.workload).

    A bad value (out of tuner.bench.workload's bounds too) exits with status 2,
    the message naming the flag and the fix saying what to give.
    """
    texts = {
        "input_len": str(input_len),
        "output_len": str(output_len),
        "num_prompts": str(num_prompts),
        "concurrency": "" if concurrency is None else str(concurrency),
        "request_rate": request_rate,
        "slo": slo or "",
    }
    try:
        return workload_from_texts(texts, warmup=warmup, seed=seed, by_flag=True)
    except WorkloadError as exc:
        raise user_error(command, exc) from None


@dataclass(frozen=True)
class WorkloadArgs:
    """The shared workload options of one command, passed on in one piece.

    Each command still declares the options itself (Typer reads the signature);
    this value carries them to :func:`make_workload` so no command repeats the
    hand-over.
    """

    input_len: int = DEFAULT_INPUT_LEN
    output_len: int = DEFAULT_OUTPUT_LEN
    num_prompts: int = DEFAULT_NUM_PROMPTS
    concurrency: int | None = None
    request_rate: str = "inf"
    warmup: int = DEFAULT_WARMUP
    seed: int = 0

    def build(self, command: str, slo: str | None = None) -> Workload:
        """The workload (tuner.lab.workload); exits with status 2 on a bad value."""
        return make_workload(command, slo=slo, **asdict(self))


def _no_gpu() -> bool:
    """True when the installed vLLM runs on CPU (or there is none): the demo is the default."""
    try:
        info = introspect(sys.executable)
    except IntrospectError:
        return True
    return not info.available or info.platform == "cpu"


def make_config(
    command: str,
    preset: str | None,
    model: str | None,
    set_items: list[str] | None,
) -> EngineConfig:
    """The engine config: preset, else the demo config (no GPU) or ``--model``, then the --set values.

    Built by :func:`tuner.lab.config.build_config` under the consent the command granted
    (:func:`grant_consent`). Exits with status 2 when the preset or a --set item is
    unusable, when the policy refuses the config, or when there is a GPU and no model was
    named (no silent default on a GPU node).
    """
    if preset:
        try:
            loaded = lab_config.load(preset)
        except lab_config.ConfigInputError as exc:
            raise usage_error(command, str(exc)) from None
        if loaded.note:
            typer.echo(f"note: {loaded.note}", err=True)
        source: Any = loaded.preset
    else:
        source = None

    def default() -> EngineConfig:
        if _no_gpu():
            return demo_config()
        raise usage_error(
            command, "no model given: pass --model ID|PATH or --preset FILE (a GPU is present)"
        )

    try:
        return lab_config.build_config(source, model, set_items or [], default=default)
    except lab_config.ConfigInputError as exc:
        raise user_error(command, exc) from None


def workload_over_preset(
    command: str, ctx: typer.Context, typed: Workload, preset: str | None
) -> Workload:
    """The workload of a command given ``--preset``: the preset's ``[workload]`` with the
    workload options the user typed over it (:func:`tuner.lab.workload.over_preset_workload`),
    said on stderr; ``typed`` when there is no preset or it has no ``[workload]``."""
    if not preset:
        return typed
    try:
        stored = lab_config.load(preset).preset.workload
    except lab_config.ConfigInputError:
        return typed  # make_config says what is wrong with the preset
    given = {name for name in OPTION_FIELDS if _typed(ctx, name)}
    try:
        merged, said = over_preset_workload(typed, given, stored)
    except WorkloadError as exc:
        raise user_error(command, exc) from None
    if said:
        typer.echo(f"workload: {said}", err=True)
    return merged


def _typed(ctx: typer.Context, name: str) -> bool:
    """True when the option ``name`` was given on the command line (or its variable)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def open_store(command: str, path: str | None = None, *, recover: bool = True) -> TrialStore:
    """Opens the trial store and marks trials of dead tunelab processes as interrupted."""
    try:
        store = TrialStore(path)
    except StoreError as exc:
        raise usage_error(command, str(exc)) from None
    if recover:
        for trial in store.recover():
            typer.echo(
                f"note: trial {trial.short_id} marked interrupted: {trial.failure_reason}", err=True
            )
    return store
