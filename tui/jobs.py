"""Background jobs: Run, A/B and Sweep as Textual workers that post their events.

A job hands the current config and workload to ``tuner`` (the trial runner,
the A/B and sweep studies) inside an async Textual worker; every event the
runner emits is posted to the main screen as :class:`~tui.messages.RunEvent`,
so the user keeps editing knobs while it runs. Jobs queue: Run while another
job runs waits for it. Stop cancels the worker; the runner's ``async with
Engine`` then stops the engine's whole process tree before the worker ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.worker import Worker, WorkerState

from tui.messages import JobFinished, RunEvent

if TYPE_CHECKING:
    from tui.app import TunelabApp

AB_REPEATS = 3  # n=2 gives 1 degree of freedom: intervals too wide to name a winner


@dataclass
class Job:
    """One queued unit of work."""

    id: int
    kind: str  # run, ab, sweep
    title: str
    make: Callable[[Callable[[Any], None]], Awaitable[Any]]


class Jobs:
    """Queue and run jobs for the app, one at a time."""

    def __init__(self, app: TunelabApp) -> None:
        self.app = app
        self.queue: deque[Job] = deque()
        self.current: Job | None = None
        self.worker: Worker[Any] | None = None
        self._ids = itertools.count(1)
        self._store: Any = None

    # -- state ------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.current is not None or bool(self.queue)

    @property
    def store(self) -> Any:
        """The trial store (opened on first use: sqlite import and file stay off start-up)."""
        if self._store is None:
            from tuner.trials.store import TrialStore

            self._store = TrialStore(self.app.session.services.store_path)
        return self._store

    # -- submitting ---------------------------------------------------------------

    def _ready(self) -> bool:
        """Refuse to queue a config the rules block, or an invalid workload."""
        session = self.app.session
        if not session.config.model:
            self.app.notify("No model: type one in the Model box (or press m).", severity="error")
            return False
        if session.workload is None:
            self.app.notify(f"Workload invalid: {session.workload_error}", severity="error")
            return False
        from tuner.rules import has_errors

        if has_errors(session.findings):
            self.app.notify(
                "Run blocked by an error finding: press f to apply its fix.",
                severity="error",
                timeout=6,
            )
            return False
        return True

    def _trial(self, config: Any, **tags: Any) -> Any:
        from tuner.trials.model import Trial

        session = self.app.session
        return Trial(config=config, workload=session.workload, study=session.study, tags=dict(tags))

    def submit_run(self) -> Job | None:
        """Queue one trial of the current config."""
        if not self._ready():
            return None
        trial = self._trial(self.app.session.config)

        async def make(emit: Callable[[Any], None]) -> Any:
            return await self._execute(trial, emit)

        return self._enqueue("run", f"trial {trial.short_id}", make)

    def submit_ab(self) -> Job | None:
        """Queue an A/B: the baseline trial's config (A) against the current config (B)."""
        if not self._ready():
            return None
        session = self.app.session
        baseline = self.baseline()
        if baseline is None:
            self.app.notify("A/B needs a baseline: run a trial first (r), then change a knob.")
            return None
        config_a, config_b, workload = baseline.config, session.config, session.workload

        async def make(emit: Callable[[Any], None]) -> Any:
            from tuner.studies.ab import run_ab

            report = await run_ab(
                config_a,
                config_b,
                workload,
                self._runner(emit),
                repeats=AB_REPEATS,
                study=session.study,
                on_trial=self._record,
            )
            session.last_ab = report
            return report

        return self._enqueue("ab", f"A/B vs {baseline.short_id} ×{AB_REPEATS}", make)

    def submit_sweep(self, spec: str) -> Job | None:
        """Queue a sweep from ``KEY=V1,V2,...`` (the sweep dialog's text)."""
        if not self._ready():
            return None
        from tuner.studies.space import SpaceError, parse_param

        try:
            param = parse_param(spec)
        except SpaceError as exc:
            self.app.notify(str(exc), severity="error", timeout=8)
            return None
        session = self.app.session
        config, workload = session.config, session.workload

        async def make(emit: Callable[[Any], None]) -> Any:
            from tuner.studies.sweep import run_sweep

            return await run_sweep(
                config,
                workload,
                [param],
                self._runner(emit),
                study=session.study,
                on_trial=self._record,
            )

        return self._enqueue("sweep", f"sweep {spec}", make)

    def baseline(self) -> Any:
        """The chosen baseline trial, else the first finished one of the session."""
        session = self.app.session
        done = [t for t in session.trials if t.results]
        if session.baseline_id:
            for trial in done:
                if trial.id == session.baseline_id:
                    return trial
        return done[0] if done else None

    # -- running ------------------------------------------------------------------

    def _enqueue(self, kind: str, title: str, make: Callable[..., Awaitable[Any]]) -> Job:
        job = Job(next(self._ids), kind, title, make)
        self.queue.append(job)
        if self.current is None:
            self._start_next()
        else:
            self.app.notify(f"Queued: {title} ({len(self.queue)} waiting)")
        return job

    def _start_next(self) -> None:
        if not self.queue:
            self.current = None
            self.app.main.set_engine_state("idle")
            return
        job = self.current = self.queue.popleft()
        self.app.main.run_panel.begin(job.title)
        self.worker = self.app.run_worker(
            self._run(job), name=f"job-{job.id}", group="jobs", exit_on_error=False
        )

    def _runner(self, emit: Callable[[Any], None]) -> Any:
        """The studies' trial runner with the app's engine options and rule context."""
        from tuner.studies.common import TrialRunner
        from tuner.trials.context import RunContext

        session, services = self.app.session, self.app.session.services
        options: dict[str, Any] = {
            "python": services.engine_python,
            "startup_timeout": services.startup_timeout,
            "context": RunContext(session.target, session.model_info, []),
        }
        if self.app.sampler is not None:
            options["sampler"] = self.app.sampler
        return TrialRunner(
            self.store, on_event=emit, options=options, command_for=services.engine_command
        )

    async def _execute(self, trial: Any, emit: Callable[[Any], None]) -> Any:
        """One trial through the runner; recorded in the session when final."""
        done = await self._runner(emit).one(trial)
        self._record(done)
        return done

    def _record(self, trial: Any) -> None:
        """A trial reached a final state: keep it for the results table."""
        self.app.session.trials.append(trial)

    async def _run(self, job: Job) -> None:
        main = self.app.main

        def emit(event: Any) -> None:
            main.post_message(RunEvent(job.id, event))

        ok, summary, result = False, "", None
        try:
            result = await job.make(emit)
            ok = True
        except asyncio.CancelledError:
            summary = "stopped by the user; engine stopped"
            main.post_message(JobFinished(job.id, job.kind, False, summary))
            raise
        except Exception as exc:  # shown to the user; the app stays up
            summary = f"{type(exc).__name__}: {exc}"
        main.post_message(JobFinished(job.id, job.kind, ok, summary, result))

    def finished(self, job_id: int) -> None:
        """Called by the screen when a job's JobFinished arrived: start the next one."""
        if self.current is not None and self.current.id == job_id:
            self.current = None
            self.worker = None
            self._start_next()

    def stop(self) -> None:
        """Cancel the running job (its engine tree is stopped) and drop the queue."""
        if self.current is None:
            self.app.notify("Nothing is running.")
            return
        self.queue.clear()
        self.app.main.set_engine_state("stopping")
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
