"""``tunelab profile A_TRACE B_TRACE``: why B is faster, from two torch-profiler traces.

The traces are what vLLM writes under ``--profiler-config``'s
``torch_profiler_dir`` between ``/start_profile`` and ``/stop_profile``
(``vllm bench serve --profile`` does this too): pass one worker's trace per
arm (``rank0.*.pt.trace.json.gz``), or the folder that holds it (the newest
rank-0 trace in it is read). The command prints each family's
milliseconds per output token in A and B, the difference, and how much of
the per-token difference the families explain (``tuner.profiles``); with
``--measured-a/--measured-b`` (an A/B's ms per output token) the difference to
explain is the measured one. Exit 2 for a file that is not such a trace.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from tuner.cli.explain_table import explanation_table
from tuner.cli.safe_text import clean
from tuner.errors import with_fix
from tuner.profiles.explain import Explanation, explain
from tuner.profiles.trace import TraceError, profile_of


def register(app: typer.Typer) -> None:
    """Adds the ``profile`` command to the tunelab CLI."""
    app.command("profile")(profile_command)


def profile_command(
    a_trace: Annotated[
        Path, typer.Argument(help="Arm A's worker trace (rank0.*.pt.trace.json.gz), or its folder.")
    ],
    b_trace: Annotated[Path, typer.Argument(help="Arm B's worker trace.")],
    platform: Annotated[
        str, typer.Option("--platform", help="Whose kernel names: cpu, rocm or cuda.")
    ] = "cpu",
    measured_a: Annotated[
        float | None, typer.Option("--measured-a", help="A's measured ms per output token.")
    ] = None,
    measured_b: Annotated[
        float | None, typer.Option("--measured-b", help="B's measured ms per output token.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Why B is faster: two torch-profiler traces as time per output token by kernel family."""
    if platform not in ("cpu", "rocm", "cuda"):
        typer.echo(
            f"tunelab profile: --platform is {clean(platform)!r}: use cpu, rocm or cuda", err=True
        )
        raise typer.Exit(2)
    if (measured_a is None) != (measured_b is None):
        typer.echo("tunelab profile: give both --measured-a and --measured-b, or neither", err=True)
        raise typer.Exit(2)
    try:
        a = profile_of(a_trace, platform)  # type: ignore[arg-type]
        b = profile_of(b_trace, platform)  # type: ignore[arg-type]
    except TraceError as exc:
        typer.echo(f"tunelab profile: {clean(with_fix(exc))}", err=True)
        raise typer.Exit(2) from None
    measured = (
        (measured_a, measured_b) if measured_a is not None and measured_b is not None else None
    )
    found = explain(a, b, measured)
    if as_json:
        typer.echo(json.dumps({"a": a.to_dict(), "b": b.to_dict(), "explanation": found.to_dict()}))
        return
    _print(found, a.steps, b.steps, a.tokens, b.tokens)


def _print(found: Explanation, a_steps: int, b_steps: int, a_tokens: int, b_tokens: int) -> None:
    console = Console(highlight=False)
    console.print(explanation_table(found))
    console.print(f"A: {a_steps} steps, {a_tokens} output tokens; B: {b_steps} steps, {b_tokens}")
    console.print(found.summary())
