"""How every study command runs: its store, progress display, trial runner and asyncio loop.

``tunelab ab``/``sweep``/``tune`` (tuner.cli.studies), ``capacity``,
``ablate``, ``presets verify`` and the TUI's service jobs each build a plan
(tuner.lab.plans) and hand it to :func:`run_study`: the store,
tuner.cli.study_output's progress display, the node's runner drawing on both,
and :func:`run_async` (SIGTERM and Ctrl-C cancel the study: the engine is
stopped and the running trial marked interrupted) around
:func:`tuner.lab.execute.execute`.
:func:`make_runner` is the one place the runner is built, so the tests'
engine doubles replace it here (tests/support/study_cli.py).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import typer

from tuner.cli import options as opt
from tuner.cli.study_output import StudyProgress, dump
from tuner.errors import EXIT_BAD_INPUT, TunelabError
from tuner.lab import node
from tuner.lab import run as lab_run
from tuner.lab.execute import execute
from tuner.trials.event_codec import EventWriter

if TYPE_CHECKING:
    from tuner.guard.settings import GuardSettings
    from tuner.lab.plans import Hooks, Plan
    from tuner.studies.executor import TrialRunner
    from tuner.trials.events import TrialEvent, TrialEventCallback
    from tuner.trials.store import TrialStore

T = TypeVar("T")


def make_runner(
    store: TrialStore, on_event: TrialEventCallback, startup_timeout: float
) -> TrialRunner:
    """The trial runner the study commands use: tuner.lab.run's, as the TUI's jobs get it.

    Tests replace this function to run an engine double (tests/support/study_cli.py).
    """
    return lab_run.runner(store, lab_run.RunOptions(startup_timeout=startup_timeout), on_event)


def use_gpus(command: str, runner: TrialRunner, gpus: str | None) -> None:
    """Restricts the runner to ``--gpus`` (tuner.lab.node); a bad list is a usage error."""
    try:
        node.use_gpus(runner, gpus)
    except TunelabError as exc:
        raise opt.usage_error(command, str(exc)) from None


def run_async(command: str, make: Callable[[], Awaitable[T]]) -> T:
    """Runs the study; SIGTERM cancels like Ctrl-C (engine stopped, trial marked interrupted)."""

    async def main() -> T:
        task = asyncio.current_task()
        if task is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await make()

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.echo(
            f"tunelab {command}: interrupted; the running trial is marked interrupted", err=True
        )
        raise typer.Exit(130) from None


@dataclass(frozen=True)
class Session:
    """Where and how a study command runs its trials (the options every study command has)."""

    command: str
    store_path: str | None
    startup_timeout: float
    verbose: bool
    guard: GuardSettings


def run_study(
    session: Session,
    plan: Plan[T],
    *,
    hooks: Hooks | None = None,
    gpus: str | None = None,
    keep: Callable[[TrialStore, T], None] | None = None,
    store: TrialStore | None = None,
) -> T:
    """Runs ``plan`` (tuner.lab.execute) with the study progress display; its input errors
    are usage errors (status 2).

    Args:
        session: The command and its store, patience, verbosity and guard.
        plan: The study, built and checked by the command (tuner.lab.plans).
        hooks: What the command prints as the study goes (launches, knobs).
        gpus: ``--gpus``: the GPUs the study may use (None: all visible).
        keep: Records the report in the store before it is closed.
        store: An open store (the command read it first and closes it); None: the
            session's store, opened and closed here.
    """
    command = session.command

    def study(store: TrialStore) -> T:
        with runner_on(
            store,
            plan.title,
            plan.planned(),
            verbose=session.verbose,
            startup_timeout=session.startup_timeout,
            prepare=lambda runner: use_gpus(command, runner, gpus),
            skips_extra=plan.skips_extra,
        ) as runner:
            # The guard goes to run_trial/run_workloads with the runner's other options
            # (tuner.lab.run.runner puts RunOptions.guard there the same way); set here,
            # not in make_runner, whose signature the tests' engine doubles replace.
            runner.options["guard"] = session.guard
            report = run_async(command, lambda: execute(plan, runner, hooks))
            if keep is not None:
                keep(store, report)
            return report

    try:
        if store is not None:
            return study(store)
        opened = opt.open_store(command, session.store_path)
        try:
            return study(opened)
        finally:
            opened.close()
    except TunelabError as exc:
        if exc.exit_code != EXIT_BAD_INPUT:
            raise
        raise opt.user_error(command, exc) from None


@contextmanager
def runner_on(
    store: TrialStore,
    title: str,
    planned: int,
    *,
    verbose: bool,
    startup_timeout: float,
    prepare: Callable[[TrialRunner], None] | None = None,
    skips_extra: bool = False,
) -> Iterator[TrialRunner]:
    """The progress display and the node's trial runner (:func:`node_runner`) on an open
    ``store`` (its caller closes it)."""
    with (
        StudyProgress(title, planned, show_log=verbose, skips_extra=skips_extra) as progress,
        node_runner(store, progress, startup_timeout=startup_timeout) as runner,
    ):
        if prepare is not None:
            prepare(runner)
        yield runner


@contextmanager
def node_runner(
    store: TrialStore,
    on_event: TrialEventCallback,
    *,
    startup_timeout: float,
    guard: GuardSettings | None = None,
) -> Iterator[TrialRunner]:
    """The one trial runner of every CLI face and service job, measured on this node.

    Built by :func:`make_runner` (the tests' doubles replace it), with the
    node's GPU telemetry (tuner.lab.node) so every trial gets its power, VRAM
    and GFX window, tokens per joule and clean-sample count, as the TUI's do.
    Its events also go to the job's event file when the study service runs
    the command, so a TUI can follow any study or run, whoever started it.
    """
    events = EventWriter.from_env()
    try:
        with node.telemetry() as sampler:
            runner = make_runner(store, _tee(on_event, events), startup_timeout)
            if sampler is not None:
                runner.options["sampler"] = sampler
            if guard is not None:
                runner.options["guard"] = guard
            yield runner
    finally:
        if events is not None:
            events.close()


def _tee(progress: TrialEventCallback, events: EventWriter | None) -> TrialEventCallback:
    """The progress display, and the job's event file when the study service runs this command
    (tuner.trials.event_codec: a TUI follows the study through it, whoever started it)."""
    if events is None:
        return progress

    def both(event: TrialEvent) -> None:
        progress(event)
        events(event)

    return both


def emit(
    report: T, as_json: bool, to_dict: Callable[[T], object], show: Callable[[T], None]
) -> None:
    """The report as JSON on stdout (``--json``) or as the command's tables."""
    if as_json:
        typer.echo(dump(to_dict(report)))
    else:
        show(report)
