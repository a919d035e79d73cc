"""Options shared by the commands that run trials (run, ab, sweep, tune) and how they become objects.

Typer has no option groups, so each shared option is an ``Annotated`` alias a
command declares as a parameter, and the builders here turn the values into
a ``Workload``, an ``EngineConfig`` and an open ``TrialStore``. Bad input ends
the command with status 2 and one line saying what to fix; nothing is run or
written first. Heavy modules are imported inside the builders only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.trials.store import TrialStore

# Device-selection variables vLLM reads but tunelab does not tune (not catalogue knobs).
PASSTHROUGH_ENV = frozenset({"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})

# -- config ----------------------------------------------------------------------
PresetOpt = Annotated[
    str | None,
    typer.Option(
        "--preset",
        help="Preset to start from (its model, env and engine args): a .toml file or the "
        "name of a shipped/user preset (`tunelab presets list`).",
    ),
]
AllowCodeOpt = Annotated[
    bool,
    typer.Option(
        "--allow-code",
        help="Accept preset engine arguments that load or run code (trust-remote-code, "
        "tool-parser-plugin, ...): only for presets you trust.",
    ),
]
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
InputLenOpt = Annotated[int, typer.Option("--input-len", min=1, help="Prompt tokens per request.")]
OutputLenOpt = Annotated[
    int, typer.Option("--output-len", min=1, help="Generated tokens per request.")
]
NumPromptsOpt = Annotated[
    int, typer.Option("--num-prompts", min=1, help="Measured requests per trial.")
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option("--concurrency", min=1, help="Most requests in flight (default: unbounded)."),
]
RequestRateOpt = Annotated[
    str, typer.Option("--request-rate", help="Arrivals per second, or `inf` to send all at once.")
]
WarmupOpt = Annotated[
    int, typer.Option("--warmup", min=0, help="Warm-up requests before measuring.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for prompts and arrival times.")]
SloOpt = Annotated[
    str | None,
    typer.Option(
        "--slo", help="Goodput SLO in ms, e.g. ttft:500,itl:50 (keys ttft, tpot, itl, e2el)."
    ),
]
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
        "--startup-timeout", min=1.0, help="Seconds the engine may take to become healthy."
    ),
]

DEFAULT_INPUT_LEN = 128
DEFAULT_OUTPUT_LEN = 128
DEFAULT_NUM_PROMPTS = 64
DEFAULT_WARMUP = 2


def usage_error(command: str, message: str) -> typer.Exit:
    """Prints ``tunelab COMMAND: message`` to stderr and returns the exit (status 2) to raise."""
    typer.echo(f"tunelab {command}: {message}", err=True)
    return typer.Exit(2)


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
    """The workload from the shared options; exits with status 2 on a bad value."""
    import math

    from tuner.bench.workload import Workload, WorkloadError, parse_slo

    text = request_rate.strip().lower()
    try:
        rate = math.inf if text in {"inf", "infinity"} else float(text)
    except ValueError:
        raise usage_error(
            command, f"--request-rate {request_rate!r} is not a number; give e.g. 4.0 or inf"
        ) from None
    try:
        return Workload(
            input_len=input_len,
            output_len=output_len,
            num_prompts=num_prompts,
            concurrency=concurrency,
            request_rate=rate,
            warmup_requests=warmup,
            seed=seed,
            slo=parse_slo(slo) if slo else {},
        )
    except WorkloadError as exc:
        raise usage_error(command, str(exc)) from None


def _no_gpu() -> bool:
    """True when the installed vLLM runs on CPU (or there is none): the demo is the default."""
    import sys

    from tuner.introspect import IntrospectError, introspect

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
    *,
    allow_code: bool = False,
) -> EngineConfig:
    """The engine config: preset, else the demo config (no GPU) or ``--model``, then the --set values.

    Exits with status 2 when the preset or a --set item is unusable, or when
    there is a GPU and no model was named (no silent default on a GPU node).
    """
    from tuner.config import ConfigError, EngineConfig, split_assignment
    from tuner.cpu_demo import DEMO_MODEL_ALIAS, demo_config, resolve_model

    base: EngineConfig
    if preset:
        from tuner.export.catalog import open_preset
        from tuner.export.errors import PresetError

        try:
            loaded, note = open_preset(preset, allow_code=allow_code)
            if note:
                typer.echo(f"note: {note}", err=True)
            base = loaded.config
            if model:
                base = EngineConfig(
                    model=resolve_model(model), env=dict(base.env), engine=dict(base.engine)
                )
        except (PresetError, ConfigError) as exc:
            raise usage_error(command, str(exc)) from None
    elif model and model != DEMO_MODEL_ALIAS:
        try:
            base = EngineConfig(model=resolve_model(model))
        except ConfigError as exc:
            raise usage_error(command, str(exc)) from None
    elif model == DEMO_MODEL_ALIAS or _no_gpu():
        base = demo_config()
    else:
        raise usage_error(
            command, "no model given: pass --model ID|PATH or --preset FILE (a GPU is present)"
        )
    from tuner.knobs import parse_assignments

    passthrough: dict[str, Any] = {}
    knob_items: list[str] = []
    try:
        for item in set_items or []:
            key, value = split_assignment(item)
            if key in PASSTHROUGH_ENV:
                passthrough[key] = value
            else:
                knob_items.append(item)
        return base.with_values({**parse_assignments(knob_items), **passthrough})
    except ConfigError as exc:
        raise usage_error(command, str(exc)) from None


def open_store(command: str, path: str | None = None, *, recover: bool = True) -> TrialStore:
    """Opens the trial store and marks trials of dead tunelab processes as interrupted."""
    from tuner.trials.store import StoreError, TrialStore

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
