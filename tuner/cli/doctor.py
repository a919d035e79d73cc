"""`tunelab doctor [--json]`: what to check first on a new node."""

from __future__ import annotations

import json
import sys

import typer
from rich.console import Console

from tuner.doctor import gather


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
        python: str = typer.Option(
            sys.executable,
            "--python",
            help="Interpreter of the environment whose vLLM the engine uses.",
        ),
        refresh: bool = typer.Option(
            False, "--refresh", help="Re-probe vLLM instead of using the cache."
        ),
    ) -> None:
        """Python, tunelab, vLLM (version, platform, how it starts), GPUs and the demo model."""
        report = gather(python, refresh=refresh)
        if as_json:
            typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
            return

        con = Console()
        con.print(
            f"[bold]tunelab[/] {report.tunelab_version} on {report.node} "
            f"(Python {report.python_version}, {report.python})"
        )
        con.print("\n[bold]vLLM[/]")
        for line in report.vllm_lines:
            con.print(f"  {line}", highlight=False)
        if report.differences:
            con.print(
                f"\n[bold]Catalogue vs installed vLLM[/] ({len(report.differences)} differences; installed wins)"
            )
            for diff in report.differences[:40]:
                con.print(f"  - {diff['message']}", highlight=False)
            if len(report.differences) > 40:
                con.print(f"  ... {len(report.differences) - 40} more (see --json)")
        con.print(f"\n[bold]GPUs[/] (backend: {report.gpu_backend})")
        for line in report.gpu_lines:
            con.print(f"  {line}", highlight=False)
        con.print("\n[bold]Host[/]")
        for check in report.host_checks:
            color = {"ok": "green", "warning": "yellow"}.get(check.state.value, "dim")
            con.print(
                f"  {check.name}: [{color}]{check.value or check.state.value}[/] — {check.message}",
                highlight=False,
            )
        state = (
            "built" if report.demo_model_built else "not built yet (`tunelab demo-model` builds it)"
        )
        con.print(f"\n[bold]Demo model[/] {report.demo_model} — {state}")
