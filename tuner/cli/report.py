"""``tunelab report``: a study as a shareable HTML page and a Markdown twin, from the store."""

from __future__ import annotations

from typing import Annotated

import typer

from tuner.cli import options as opt
from tuner.report import write_report


def register(app: typer.Typer) -> None:
    """Adds ``report`` to the tunelab CLI."""
    app.command("report")(report_command)


def report_command(
    study: Annotated[
        str | None,
        typer.Option("--study", help="Study to report (default: the one with the newest trial)."),
    ] = None,
    out: Annotated[
        str, typer.Option("--out", help="Folder for report.html and report.md.")
    ] = "tunelab-report",
    store_path: opt.StoreOpt = None,
) -> None:
    """Write report.html (self-contained, opens offline) and report.md for a study."""
    written = write_report(out, study=study, store_path=store_path)
    typer.echo(f"wrote {written.html} and {written.markdown} ({written.trials} trials)")
