"""Background jobs: Run, A/B and Sweep as Textual workers that post their events.

A job hands the current config and workload to the core (``tuner.lab.run``)
inside an async Textual worker; every event the runner emits is posted to the
main screen as :class:`~tui.messages.RunEvent`, so the user keeps editing
knobs while it runs. Jobs queue: Run while another job runs waits for it.
Stop cancels the worker; the runner's ``async with Engine`` then stops the
engine's whole process tree before the worker ends.

The queue knows its host only through :class:`JobHost` (callables), not the
App, so ``tui.app`` imports this module and nothing here imports the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from textual.message import Message
from textual.worker import Worker, WorkerState

from tui import detached
from tui.messages import JobFinished, JobKind, JobResult, RunEvent
from tui.session import Session
from tuner.errors import TunelabError
from tuner.rules import Severity
from tuner.trials.events import TrialEvent
from tuner.trials.model import Trial
from tuner.trials.store import StoreError, TrialStore

if TYPE_CHECKING:
    from tuner.lab import run as lab_run
    from tuner.lab.study import Study
    from tuner.studies.executor import TrialRunner


class Emit(Protocol):
    """Posts a job's event to the screen; ``at``: when it happened, for a replayed one."""

    def __call__(self, event: TrialEvent, at: float | None = None) -> None: ...


@dataclass
class JobHost:
    """What the job queue needs from the app, as callables.

    Attributes:
        session: The state the jobs read (config, workload, findings, study).
        notify: Shows a toast (``App.notify``).
        post: Posts a message to the main screen.
        begin: A job starts: show its title, its launch plan and kind (the run panel).
        engine_state: Sets the header's engine state (idle, stopping, ...).
        run_worker: Starts a coroutine as a Textual worker (``App.run_worker``).
        options: The run options of the next trial (sampler and target may change).
    """

    session: Session
    notify: Callable[..., object]
    post: Callable[[Message], object]
    begin: Callable[[str, tuple[str, ...], JobKind], object]
    engine_state: Callable[[str], object]
    run_worker: Callable[..., Worker[None]]
    options: Callable[[], lab_run.RunOptions]


@dataclass
class Job:
    """One queued unit of work."""

    id: int
    kind: JobKind
    title: str
    make: Callable[[Emit], Awaitable[JobResult]]
    plan: tuple[str, ...] = ()  # one label per engine launch (A/B arms, sweep points)
    # What a stopped job still measured, as lines for the Run panel (a capacity's launches).
    kept: Callable[[], tuple[str, ...]] | None = None


class Jobs:
    """Queue and run jobs for the app, one at a time."""

    def __init__(self, host: JobHost) -> None:
        self.host = host
        self.queue: deque[Job] = deque()
        self.current: Job | None = None
        self.worker: Worker[None] | None = None
        self._ids = itertools.count(1)
        self._store: TrialStore | None = None
        self._user_stop = False
        self.following: str | None = None  # the study-service job the current job follows
        self._cancel_note: str | None = None

    # -- state ------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.current is not None or bool(self.queue)

    @property
    def store(self) -> TrialStore:
        """The trial store (opened on first use: the file stays off start-up)."""
        if self._store is None:
            self._store = TrialStore(self.host.session.services.store_path)
        return self._store

    def study(self) -> Study:
        """The session's study as the core answers questions about it (store unreadable: session)."""
        # Deferred: the study layer loads when a job or view needs it, not at first paint.
        from tuner.lab.study import Study

        session = self.host.session
        try:
            store: TrialStore | None = self.store
        except StoreError:
            store = None
        return Study(store, session.study, session.trials)

    # -- submitting ---------------------------------------------------------------

    def _ready(self) -> bool:
        """Refuse to queue a config the rules block, or an invalid workload."""
        session, notify = self.host.session, self.host.notify
        if not session.config.model:
            notify("No model: type one in the Model box (or press m).", severity="error")
            return False
        if session.workload is None:
            notify(f"Workload invalid: {session.workload_error}", severity="error")
            return False
        errors = [f for f in session.findings if f.severity is Severity.ERROR]
        if errors:
            hint = (
                "press f to apply its fix"
                if any(f.fix for f in errors)
                else "change the knob it names"
            )
            notify(f"Run blocked by an error finding: {hint}.", severity="error", timeout=6)
            return False
        return True

    def submit_run(self) -> Job | None:
        """Queue one trial of the current config."""
        if not self._ready():
            return None
        session = self.host.session
        assert session.workload is not None  # _ready checked it
        trial = Trial(config=session.config, workload=session.workload, study=session.study)

        async def make(emit: Emit) -> JobResult:
            done = await self._runner(emit).one(trial)
            self._record(done)
            return done

        return self._enqueue(JobKind.RUN, f"trial {trial.short_id}", make)

    def submit_ab(self, profile: bool = False) -> Job | None:
        """Queue an A/B: the baseline trial's config (A) against the current config (B).

        ``profile``: each arm's first launch is profiled after its measured run, and
        the A/B says why B is faster by kernel family (issue 29).
        """
        if not self._ready():
            return None
        # Deferred: the engine and study stacks load when a job starts, not at first paint.
        from tuner.lab import run as lab_run

        session = self.host.session
        baseline = self.study().baseline()
        if baseline is None:
            self.host.notify("A/B needs a baseline: run a trial first (r), then change a knob.")
            return None
        config_a, config_b, workload = baseline.trial.config, session.config, session.workload
        assert workload is not None
        study = self.study()

        async def in_process(emit: Emit) -> JobResult:
            report = await lab_run.ab(
                config_a,
                config_b,
                workload,
                self._runner(emit),
                study=session.study,
                on_trial=self._record,
                profile=profile,
            )
            study.remember_ab(report)
            return report

        title = f"A/B vs {baseline.trial.short_id} ×{lab_run.AB_REPEATS}"
        title += ", profiled" if profile else ""
        plan = ab_plan(lab_run.AB_REPEATS)
        if not self.detaches:
            return self._enqueue(JobKind.AB, title, in_process, plan)
        from tuner.lab.job_spec import ABJobSpec

        services = session.services
        spec = ABJobSpec(
            study=session.study,
            store_path=detached.store_field(services.store_path),
            a=config_a,
            b=config_b,
            workload=workload,
            repeats=lab_run.AB_REPEATS,
            startup_timeout=services.startup_timeout,
            profile=profile,
        )

        async def detached_ab(emit: Emit) -> JobResult:
            from tuner.service import paths
            from tuner.service.client import ServiceError

            try:
                job = await asyncio.to_thread(detached.submit, spec, paths.jobs_dir())
            except ServiceError as exc:
                self.host.notify(
                    f"The study service cannot take the A/B ({exc.message}): it runs in this "
                    "TUI and ends with it.",
                    severity="warning",
                    timeout=10,
                )
                return await in_process(emit)
            self.host.notify(
                f"A/B runs as job {job.job_id}: it goes on if this terminal closes "
                "(reopen tunelab to see it).",
                timeout=6,
            )
            return await self._follow(job.job_id, emit)

        return self._enqueue(JobKind.AB, title, detached_ab, plan)

    @property
    def detaches(self) -> bool:
        """A/Bs run as study-service jobs (they outlive the terminal) unless the engine is
        an in-process stand-in: an engine double's command cannot travel to the service."""
        return self.host.session.services.engine_command is None

    def attach_if_new(self, found: detached.DetachedAB) -> Job | None:
        """At start-up: follow the study's detached A/B if it runs, or if it ended and no TUI
        showed its end yet (its verdict is then shown once)."""
        # Study reads an unreadable store as "nothing shown yet": the end is shown again.
        if found.ended and self.study().job_shown() == found.job_id:
            return None
        self.host.notify(f"Attached to the A/B job {found.job_id} ({found.state}).", timeout=6)
        return self.attach(found)

    def attach(self, found: detached.DetachedAB) -> Job:
        """Follow a detached A/B this TUI did not start (an earlier TUI on this study did)."""
        plan = ab_plan(found.repeats)
        # Its state then is in the attach notice; the panel's title adds how it ended
        # (RunPanel.end), so it never reads "running" after the verdict.
        title = f"A/B job {found.job_id} (detached)"

        async def make(emit: Emit) -> JobResult:
            return await self._follow(found.job_id, emit)

        return self._enqueue(JobKind.AB, title, make, plan)

    async def _follow(self, job_id: str, emit: Emit) -> JobResult:
        """Follows the service job; Stop stops it there, quitting only stops following."""
        self.following = job_id
        try:
            return await detached.follow(job_id, emit, self._record, self.study)
        except asyncio.CancelledError:
            if self._user_stop:
                self._cancel_note = f"stopped by the user; job {job_id} stops its engine"
                await asyncio.shield(asyncio.to_thread(detached.stop, job_id))
            raise
        finally:
            self.following = None

    def submit_sweep(self, spec: str) -> Job | None:
        """Queue a sweep from ``KEY=V1,V2,...`` (the sweep dialog's text)."""
        if not self._ready():
            return None
        # Deferred: the engine and study stacks load when a job starts, not at first paint.
        from tuner.lab import run as lab_run

        try:
            param = lab_run.parse_param(spec)
        except TunelabError as exc:  # parse_param's SpaceError: says how to write the text
            self.host.notify(str(exc), severity="error", timeout=8)
            return None
        session = self.host.session
        config, workload = session.config, session.workload
        assert workload is not None

        async def make(emit: Emit) -> JobResult:
            return await lab_run.sweep(
                config,
                workload,
                param,
                self._runner(emit),
                study=session.study,
                on_trial=self._record,
            )

        plan = tuple(f"{param.key}={value}" for value in param.choices)
        return self._enqueue(JobKind.SWEEP, f"sweep {spec}", make, plan)

    def submit_capacity(self, slo_text: str) -> Job | None:
        """Queue a capacity search of the current config at ``slo_text`` (vLLM's SLO spelling)."""
        if not self._ready():
            return None
        # Deferred: the engine and study stacks load when a job starts, not at first paint.
        from tuner.lab import capacity as lab_capacity
        from tuner.lab import run as lab_run

        try:
            slo = lab_capacity.parse(slo_text)
        except lab_capacity.SLOError as exc:
            fix = f" ({exc.fix})" if exc.fix else ""
            self.host.notify(f"{exc}{fix}", severity="error", timeout=10)
            return None
        session = self.host.session
        config, workload = session.config, session.workload
        assert workload is not None

        probes: set[str] = set()

        def record(trial: Trial) -> None:
            probes.add(trial.id)
            self._record(trial)

        async def make(emit: Emit) -> JobResult:
            return await lab_run.capacity(
                config, workload, slo, self._runner(emit), study=session.study, on_trial=record
            )

        def kept() -> tuple[str, ...]:
            """Each launch this search measured, from the stored probes (the core's summary)."""
            steps = [s for s in self.study().capacity_steps() if probes & set(s.trial_ids)]
            return tuple(s.summary() for s in steps if s.capacity is not None)

        plan = tuple(f"L{n + 1}" for n in range(lab_capacity.LAUNCHES))
        job = self._enqueue(JobKind.CAPACITY, f"capacity at {slo}", make, plan)
        job.kept = kept
        return job

    # -- running ------------------------------------------------------------------

    def _enqueue(
        self,
        kind: JobKind,
        title: str,
        make: Callable[[Emit], Awaitable[JobResult]],
        plan: tuple[str, ...] = (),
    ) -> Job:
        job = Job(next(self._ids), kind, title, make, plan)
        self.queue.append(job)
        if self.current is None:
            self._start_next()
        else:
            self.host.notify(f"Queued: {title} ({len(self.queue)} waiting)")
        return job

    def _start_next(self) -> None:
        if not self.queue:
            self.current = None
            self.host.engine_state("idle")
            return
        job = self.current = self.queue.popleft()
        self._user_stop, self._cancel_note = False, None
        self.host.begin(job.title, job.plan, job.kind)
        self.worker = self.host.run_worker(
            self._run(job), name=f"job-{job.id}", group="jobs", exit_on_error=False
        )

    def _runner(self, emit: Emit) -> TrialRunner:
        """The trial runner with the app's engine options and rule context."""
        from tuner.lab import run as lab_run  # the engine stack loads when a job starts

        return lab_run.runner(self.store, self.host.options(), emit)

    def _record(self, trial: Trial) -> None:
        """A trial reached a final state: keep it for the results table."""
        self.host.session.trials.append(trial)

    async def _run(self, job: Job) -> None:
        post = self.host.post

        def emit(event: TrialEvent, at: float | None = None) -> None:
            post(RunEvent(job.id, event, at))

        ok, summary, result = False, "", None
        try:
            result = await job.make(emit)
            ok = True
        except asyncio.CancelledError:
            note = self._cancel_note or "stopped by the user; engine stopped"
            post(JobFinished(job.id, job.kind, False, note, kept=_kept(job)))
            raise
        except Exception as exc:  # shown to the user; the app stays up
            summary = f"{type(exc).__name__}: {exc}"
        post(JobFinished(job.id, job.kind, ok, summary, result))

    def finished(self, job_id: int) -> None:
        """Called by the screen when a job's JobFinished arrived: start the next one."""
        if self.current is not None and self.current.id == job_id:
            self.current = None
            self.worker = None
            self._start_next()

    def stop(self) -> None:
        """Cancel the running job (its engine tree is stopped) and drop the queue."""
        if self.current is None:
            self.host.notify("Nothing is running.")
            return
        self.queue.clear()
        self.host.engine_state("stopping")
        self._user_stop = True
        if self.worker is not None:
            self.worker.cancel()

    async def stop_and_wait(self, timeout: float = 60.0) -> None:
        """Stop and wait until the worker (and so the engine) is really gone."""
        self.queue.clear()
        worker = self.worker
        if worker is not None and worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
            worker.cancel()
            # Cancelled or timed out: either way there is nothing more to wait for.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.wait(), timeout)
        self.current = None
        if self._store is not None:
            self._store.close()
            self._store = None


def ab_plan(repeats: int) -> tuple[str, ...]:
    """One label per launch of an A/B (``A1``, ``B1``, ...), in the core's schedule's order."""
    # Deferred: the study stack loads when a job starts, not at first paint.
    from tuner.lab.reports import ab_schedule

    return tuple(f"{arm}{rep + 1}" for arm, rep in ab_schedule(repeats))


def _kept(job: Job) -> tuple[str, ...]:
    """What the stopped ``job`` still measured; nothing when that cannot be read."""
    if job.kept is None:
        return ()
    try:
        return job.kept()
    except Exception:  # a stop must end cleanly: the Results view still lists the probes
        return ()
