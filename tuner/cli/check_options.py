"""The options of ``tunelab check``, declared once (one ``Annotated`` alias each).

Typer has no option groups; keeping the aliases here keeps ``check_command``'s
signature one line per option. The check's options differ from ``tunelab
run``'s on purpose: the workload sizes are optional (unset: the rules judge
the config alone) and the target can name another machine.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from tuner.cli.consent_options import AllowCodeOpt as AllowCodeOpt
from tuner.cli.consent_options import AllowEnvOpt as AllowEnvOpt


class PlatformName(StrEnum):
    """Values of ``--platform`` (of ``check``, ``knobs`` and ``presets check``)."""

    rocm = "rocm"
    cuda = "cuda"
    cpu = "cpu"


class Goal(StrEnum):
    """Values of ``--goal``."""

    interactive = "interactive"
    streaming = "streaming"
    offline = "offline"


PresetOpt = Annotated[str | None, typer.Option("--preset", help="A preset TOML file to check.")]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model id (org/name) or local path; overrides the preset's."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="KEY=VALUE knob value (repeatable), e.g. VLLM_ROCM_USE_AITER=1."),
]
VllmVersionOpt = Annotated[
    str | None, typer.Option("--vllm-version", help="Target vLLM version (default: installed).")
]
PlatformOpt = Annotated[
    PlatformName | None,
    typer.Option("--platform", help="Target platform (default: installed vLLM's)."),
]
GpuCountOpt = Annotated[int | None, typer.Option("--gpus", min=1, help="GPUs on the target node.")]
GpuOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu",
        help="Target GPU (MI300X, MI325X, MI355X, H100, B200, MI300X-CPX, 4xMI300X): "
        "memory, architecture and count for the rules.",
    ),
]
VramOpt = Annotated[
    float | None,
    typer.Option("--vram-gib", min=0.001, help="Memory of one GPU in GiB (enables fit checks)."),
]
ConcurrencyOpt = Annotated[
    int | None,
    typer.Option("--concurrency", min=1, help="Requests in flight the engine will serve."),
]
InputLenOpt = Annotated[
    int | None, typer.Option("--input-len", min=1, help="Prompt tokens per request.")
]
OutputLenOpt = Annotated[
    int | None, typer.Option("--output-len", min=1, help="Generated tokens per request.")
]
GoalOpt = Annotated[Goal | None, typer.Option("--goal", help="What to optimise for.")]
OfflineOpt = Annotated[
    bool,
    typer.Option("--offline", help="Never ask the Hugging Face hub (local files and cache only)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the findings as a JSON array.")]
ValidateOpt = Annotated[
    bool,
    typer.Option(
        "--validate",
        help="Also ask the installed vLLM to build this config (its own validators, no engine; "
        "about 10 s, then cached) and report what it refuses in its words.",
    ),
]
