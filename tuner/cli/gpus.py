"""``tunelab gpus``: the GPUs of this machine as a table, once or live.

Reads go through the same :class:`~tuner.telemetry.Sampler` the TUI uses,
so a hung GPU shows "read timed out" instead of freezing the command. With
no GPU visible the command says so and why (one reason per library tried)
and exits 0 — unless a backend was forced with ``--backend amd|nvidia``, in
which case its absence is an error (exit 1).
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tuner.telemetry import Sampler, select_backend
from tuner.telemetry import format as fmt

if TYPE_CHECKING:
    from rich.console import RenderableType

    from tuner.telemetry import Backend, GpuSnapshot


class BackendName(StrEnum):
    """Values of ``--backend``."""

    auto = "auto"
    amd = "amd"
    nvidia = "nvidia"
    none = "none"


# A one-shot read waits this long for the reads before calling the GPU being read hung (the GPUs
# behind it get as long again: tuner.telemetry.readers).
ONE_SHOT_TIMEOUT_S = 5.0


def register(app: typer.Typer) -> None:
    """Add the ``gpus`` command to the tunelab CLI."""
    app.command("gpus")(gpus)


def gpus(
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print JSON (one object; one line per refresh with --watch)."),
    ] = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C.")] = False,
    backend: Annotated[
        BackendName,
        typer.Option("--backend", help="Telemetry library: auto tries amdsmi, then NVML."),
    ] = BackendName.auto,
    interval: Annotated[
        float, typer.Option("--interval", min=0.1, help="Seconds between refreshes with --watch.")
    ] = 1.0,
    count: Annotated[
        int | None,
        typer.Option("--count", min=1, help="With --watch: stop after this many refreshes."),
    ] = None,
) -> None:
    """Show GPU utilisation, VRAM, power, temperatures, clocks, partitions and processes."""
    console = Console()
    chosen = select_backend(backend.value)
    try:
        if chosen.count() == 0:
            _no_gpu(console, chosen, as_json)
            forced = backend in (BackendName.amd, BackendName.nvidia)
            raise typer.Exit(code=1 if forced else 0)
        if not watch:
            sampler = Sampler(chosen, read_timeout=ONE_SHOT_TIMEOUT_S)
            try:
                snaps = sampler.sample_now()
            finally:
                sampler.stop()
            if as_json:
                typer.echo(json.dumps(_payload(chosen, snaps)))
            else:
                console.print(_render(chosen.description, snaps))
            return
        _watch(console, chosen, as_json, interval, count)
    finally:
        chosen.close()


def _watch(
    console: object, chosen: Backend, as_json: bool, interval: float, count: int | None
) -> None:

    sampler = Sampler(chosen, rate_hz=1.0 / interval, history=2)
    shown = 0
    try:
        snaps = sampler.sample_now()
        sampler.start()
        if as_json:
            while True:
                typer.echo(json.dumps(_payload(chosen, snaps)))
                shown += 1
                if count is not None and shown >= count:
                    return
                time.sleep(interval)
                snaps = sampler.latest()
        with Live(
            _render(chosen.description, snaps),
            console=console,  # type: ignore[arg-type]
            refresh_per_second=max(1.0, 1.0 / interval),
        ) as live:
            while True:
                shown += 1
                if count is not None and shown >= count:
                    return
                time.sleep(interval)
                live.update(_render(chosen.description, sampler.latest()))
    except KeyboardInterrupt:
        return
    finally:
        sampler.stop()


def _payload(chosen: Backend, snaps: list[GpuSnapshot]) -> dict[str, object]:
    return {
        "backend": chosen.name,
        "description": chosen.description,
        "reasons": list(chosen.reasons),
        "time": time.time(),
        "gpus": [s.to_dict() for s in snaps],
    }


def _no_gpu(console: object, chosen: Backend, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(_payload(chosen, [])))
        return

    lines = Text()
    lines.append("No GPU visible", style="bold yellow")
    lines.append(" — tunelab has no GPU telemetry on this machine.\n")
    for reason in chosen.reasons or ("no telemetry library could be used",):
        lines.append(f"  • {reason}\n")
    lines.append(
        "Benchmarks still run on the embedded CPU engine; power, energy and VRAM show as N/A.",
        style="dim",
    )
    console.print(lines)  # type: ignore[attr-defined]


def _render(description: str, snaps: list[GpuSnapshot]) -> RenderableType:

    table = Table(title=description, title_justify="left", expand=False, pad_edge=False)
    for header, justify, wrap in (
        ("GPU", "right", False),
        ("Name", "left", True),
        ("Arch", "left", False),
        ("GFX", "right", False),
        ("MEM", "right", False),
        ("VRAM GiB", "right", False),
        ("Power W", "right", False),
        ("Temp °C e/h/m", "right", False),
        ("MHz gfx/mem", "right", False),
        ("Partition", "left", False),
        ("Throttle", "left", True),
        ("Procs", "right", False),
    ):
        table.add_column(header, justify=justify, no_wrap=not wrap)  # type: ignore[arg-type]
    procs = Table(title="Processes", title_justify="left")
    for header in ("GPU", "PID", "Name", "VRAM GiB"):
        procs.add_column(header)
    any_proc = False
    for s in snaps:
        if s.error is not None:
            table.add_row(
                str(s.index),
                f"{fmt.text(s.name)} [red]({s.error})[/red]",
                *([fmt.NA] * 10),
            )
            continue
        throttle = fmt.text(s.throttle)
        if s.throttle not in (None, "none", "idle"):
            throttle = f"[yellow]{throttle}[/yellow]"
        table.add_row(
            str(s.index),
            fmt.text(s.name),
            fmt.text(s.arch),
            fmt.pct(s.gfx_activity),
            fmt.pct(s.umc_activity),
            fmt.vram(s, unit=False),
            fmt.power(s, unit=False),
            fmt.temps(s, unit=False),
            fmt.clocks(s, unit=False),
            fmt.partition(s),
            throttle,
            fmt.process_count(s),
        )
        for p in s.processes or ():
            any_proc = True
            procs.add_row(str(s.index), str(p.pid), fmt.text(p.name), fmt.gib(p.vram_bytes))
    return Group(table, procs) if any_proc else table
