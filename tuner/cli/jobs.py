"""``tunelab jobs``: run any tunelab command detached from the terminal, and find it again.

``tunelab jobs start -- ab --a-set ... --b-set ...`` hands the command to the
per-user study service (tuner.service) and returns; the study goes on if
the SSH session drops. ``tunelab jobs`` lists the jobs, ``follow`` shows one's
output as it runs (Ctrl-C stops following, not the job), ``log`` prints it,
``stop`` ends it the way Ctrl-C ends a foreground command.

What a job wrote (its log) and what the service says about it (titles,
notes) is printed through :func:`tuner.cli.safe_text.clean`: a job's output
may quote hostile text, and it must not reach the terminal as escape sequences.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tuner.cli.consent_options import AllowCodeOpt, AllowEnvOpt, grant_consent
from tuner.cli.safe_text import clean
from tuner.service.client import ServiceClient
from tuner.service.view import job_line

jobs_app = typer.Typer(
    help="Detached work: start a tunelab command that outlives the terminal, list, follow, stop.",
    no_args_is_help=False,
    invoke_without_command=True,
)


def register(app: typer.Typer) -> None:
    """Adds ``jobs`` to the tunelab CLI."""
    app.add_typer(jobs_app, name="jobs")


@jobs_app.callback()
def jobs_list(ctx: typer.Context) -> None:
    """With no sub-command: list this user's jobs, oldest first."""
    if ctx.invoked_subcommand is not None:
        return

    with ServiceClient() as client:
        jobs = client.recorded_jobs()
    if not jobs:
        typer.echo("No jobs yet. Start one with `tunelab jobs start -- <command>`.")
        return
    for job in jobs:
        typer.echo(job_line(job))


@jobs_app.command(
    "start", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def jobs_start(
    ctx: typer.Context,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Show its output until it ends.")
    ] = False,
) -> None:
    """Run a tunelab command as a detached job: `tunelab jobs start -- ab --a-set ...`."""
    args = list(ctx.args)
    if not args:
        raise typer.BadParameter("give the command after `--`, e.g. `tunelab jobs start -- ab ...`")
    if args[0] in ("jobs", "tui"):
        raise typer.BadParameter(f"`{args[0]}` cannot run as a job; give a study or run command")
    with ServiceClient() as client:
        job = client.submit(args)
        typer.echo(clean(f"job {job['id']} {job['state']}: {job['title']}"))
        if not follow:
            typer.echo(clean(f"follow it with `tunelab jobs follow {job['id']}`"))
            return
        _follow(client, job["id"])


def _write(text: str) -> None:
    """A piece of a job's log, without escape sequences, at once (it is being followed)."""
    sys.stdout.write(clean(text))
    sys.stdout.flush()


def _follow(client: Any, job_id: str) -> None:
    try:
        job = client.follow(job_id, _write)
    except KeyboardInterrupt:
        typer.echo(f"\nstopped following; job {job_id} goes on (`tunelab jobs stop {job_id}`)")
        raise typer.Exit(130) from None
    typer.echo(job_line(job))
    if job["state"] != "finished":
        raise typer.Exit(job.get("returncode") or 1)


@jobs_app.command("follow")
def jobs_follow(job_id: Annotated[str, typer.Argument(help="Job id or a unique prefix.")]) -> None:
    """Show a job's output from the start and as it grows, until it ends."""
    with ServiceClient() as client:
        _follow(client, job_id)


@jobs_app.command("log")
def jobs_log(job_id: Annotated[str, typer.Argument(help="Job id or a unique prefix.")]) -> None:
    """Print a job's output so far."""
    with ServiceClient() as client:
        offset = 0
        while True:
            chunk = client.log(job_id, offset)
            sys.stdout.write(clean(chunk.text))
            if chunk.next_offset == offset:
                break
            offset = chunk.next_offset


@jobs_app.command("stop")
def jobs_stop(job_id: Annotated[str, typer.Argument(help="Job id or a unique prefix.")]) -> None:
    """Stop a job as Ctrl-C would (its engines are stopped; the trial is kept as interrupted)."""
    with ServiceClient() as client:
        job = client.stop(job_id)
    typer.echo(job_line(job))


@jobs_app.command("run-spec", hidden=True)
def jobs_run_spec(
    spec: Annotated[Path, typer.Argument(help="A study spec the TUI wrote (tuner.lab.job_spec).")],
    allow_code: AllowCodeOpt = False,
    allow_env: AllowEnvOpt = None,
) -> None:
    """Run a study the TUI handed to the service (its `a`), as the TUI would run it."""
    # Deferred: the study stack loads only in the job that runs it.
    from tuner.cli.tui_job import run_spec

    grant_consent(allow_code, allow_env)  # from this command line, never from the file
    run_spec(spec)
