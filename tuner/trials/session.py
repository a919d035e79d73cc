"""One engine serving a sequence of trials: the measured run under crash watch, then the guard.

The runner (tuner.trials.runner) starts the engine and hands each trial to
an :class:`EngineSession`: it runs the benchmark raced against the engine
dying (the engine's ``exited`` event fires within ~100 ms of any process of
its tree dying), judges the result (too many failed requests fail the
trial), takes the GPU telemetry window, runs the output-drift guard on the
same engine and commits the outcome to the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.bench.own_loop import on_loop, run_in_own_loop
from tuner.bench.own_process import run_in_process
from tuner.bench.runner import run_benchmark
from tuner.bench.workload import WorkloadError
from tuner.engine import proctree, running
from tuner.engine.aiter_shapes import scan
from tuner.engine.effective import start_lines
from tuner.engine.events import EngineBackendChosen, EngineLog, EngineStarting
from tuner.errors import RunFailedError
from tuner.guard import GuardSettings, run_probes
from tuner.profiles import capture, record
from tuner.telemetry.sampler import WindowSummary
from tuner.trials.events import (
    TrialBackend,
    TrialDone,
    TrialEvent,
    TrialEventCallback,
    TrialFailed,
    TrialLog,
    TrialProgress,
    TrialStage,
)
from tuner.trials.guard_check import guard_reference
from tuner.trials.model import WORKLOAD_REFUSED, Trial, TrialStatus
from tuner.trials.store import TrialStore

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.bench.runner import BenchResult
    from tuner.engine import Engine
    from tuner.engine.events import EngineEvent
    from tuner.telemetry.sampler import Sampler


# A run in which more than this share of requests failed is a failed trial:
# its surviving requests saw less load and would rank the broken config first.
MAX_FAILED_FRACTION = 0.05


def untuned_of_log(trial: Trial) -> dict[str, Any] | None:
    """The kernel shapes this trial's engine ran on AITER's default kernels so far (issue 29).

    AITER logs a shape once per process, the first time it runs, so the whole
    launch's log (not only this trial's run) says what this trial's run used;
    None without a log to read.
    """
    if not trial.log_path:
        return None
    lines = start_lines(trial.log_path)
    return scan(lines, trial.config.env).to_dict() if lines else None


class EngineSession:
    """One engine serving a sequence of trials; routes events and watches for crashes."""

    def __init__(
        self,
        store: TrialStore,
        on_event: TrialEventCallback | None,
        sampler: Sampler | None,
        gpu_indices: list[int] | None,
    ) -> None:
        self.store = store
        self.on_event = on_event
        self.sampler = sampler
        self.gpu_indices = gpu_indices
        self.current: Trial | None = None
        self.group: list[Trial] = []
        self.engine: Engine | None = None
        # The output-drift guard after each measured run (None: off).
        self.guard: GuardSettings | None = GuardSettings()
        # The benchmark client in a process of its own (tuner.bench.own_process), else
        # on an event loop of its own in a thread (tuner.bench.own_loop).
        self.client_process = False
        # The analysed model (tuner.model), for the study model's GPU prior; None: unknown.
        self.model_info: Any = None
        # Where the armed profiler writes (tuner.profiles.capture); None: not armed.
        self.profile_dir: Path | None = None

    # -- events ------------------------------------------------------------------
    def emit(self, event: TrialEvent) -> None:
        if self.on_event is None:
            return
        with contextlib.suppress(Exception):  # a watcher's bug must not fail the trial
            self.on_event(event)

    def on_engine_event(self, event: EngineEvent) -> None:

        trial = self.current
        if trial is None:
            return
        if isinstance(event, EngineLog):
            self.emit(TrialLog(trial.id, event.line))
        elif isinstance(event, EngineStarting):
            ref = proctree.ref(event.pid)
            for member in self.group:
                member.engine_pid = event.pid
                member.engine_created = ref.created if ref else None
                self.store.save(member)
        elif isinstance(event, EngineBackendChosen):
            self.emit(
                TrialBackend(trial.id, trial.backend_requested, event.backend, event.inferred)
            )

    # -- crash watch -------------------------------------------------------------
    def dead_member(self) -> str | None:
        """Why the engine died (the engine notices any member of its tree dying), else None."""
        assert self.engine is not None
        if self.engine.exited.is_set():
            return self.engine.failure_reason or "the server exited"
        return None

    async def watch_crash(self) -> str:
        """Returns the reason as soon as the engine reports a dead process (~100 ms)."""
        assert self.engine is not None
        await self.engine.exited.wait()
        return f"the engine crashed during the measured run: {self.dead_member()}"

    # -- one measurement -----------------------------------------------------------
    async def measure(self, trial: Trial, model: str) -> None:
        """Warm-up and measured run of one trial on the running engine; records the outcome.

        Raises:
            EngineCrashed: The engine died during the run (the trial is already failed).
        """
        assert self.engine is not None and self.engine.url is not None
        self.current = trial
        self.store.update_status(trial, TrialStatus.MEASURING, prediction=self._forecast(trial))
        self.emit(TrialStage(trial.id, "warmup" if trial.workload.warmup_requests else "measuring"))
        marks: dict[str, float] = {}
        if self.sampler is not None:
            marks["t0"] = self.sampler.now()
        bench = await self._bench_under_watch(trial, model, marks)
        marks["ended_wall"] = time.time()
        try:
            result = bench.result()
        except WorkloadError as exc:
            self.fail(trial, f"{WORKLOAD_REFUSED}: {exc}")
            raise WorkloadUnusable(str(exc)) from None
        except Exception as exc:
            self.fail(trial, f"the benchmark failed: {type(exc).__name__}: {exc}")
            return
        await self._record(trial, model, result, marks)

    def _forecast(self, trial: Trial) -> dict[str, Any]:
        """The study model's forecast of ``trial`` from the study's measured trials so far
        (tuner.perfmodel.forecast, issue 31), stored before its figures exist."""
        from tuner.perfmodel.forecast import forecast_record
        from tuner.perfmodel.prior import gpu_prior

        prior = gpu_prior(self.model_info, trial.gpu_names, trial.config.engine)
        return forecast_record(self.store.list(study=trial.study), trial, prior)

    def _progress(
        self, trial: Trial, marks: dict[str, float]
    ) -> Callable[[BenchProgress, float], None]:
        """The benchmark's progress callback: marks when measuring began, forwards progress."""
        sampler = self.sampler

        def progress(p: BenchProgress, sent_at: float) -> None:
            if "measuring" not in marks:
                marks["measuring"] = sent_at - p.elapsed_s
                if sampler is not None:
                    late = time.monotonic() - sent_at  # how long this loop took to get here
                    marks["t0"] = sampler.now() - late - p.elapsed_s
                if trial.workload.warmup_requests:
                    self.emit(TrialStage(trial.id, "measuring"))
            self.emit(TrialProgress(trial.id, p))

        return progress

    async def _bench_under_watch(
        self, trial: Trial, model: str, marks: dict[str, float]
    ) -> asyncio.Future[Any]:
        """The benchmark raced against the engine dying; returns the finished benchmark task.

        Records ``bench_s``. A crash during the run, or a dead engine found when
        the benchmark ends (requests to a dying server fail fast, so the
        benchmark can end before the watch ticks), fails the trial at once.

        Raises:
            EngineCrashed: The engine died (the trial is already marked failed).
        """
        assert self.engine is not None and self.engine.url is not None
        t_start = time.monotonic()
        url, progress = self.engine.url, self._progress(trial, marks)
        if self.client_process:
            # Its own process: no GIL shared with the UI or the other trials' clients.
            client = run_in_process(url, model, trial.workload, on_progress=progress)
        else:
            # Its own loop: the UI sharing this one must not delay the client's reads.
            on_progress = on_loop(progress)
            client = run_in_own_loop(
                lambda: run_benchmark(url, model, trial.workload, on_progress=on_progress)
            )
        bench = asyncio.ensure_future(client)
        crash = asyncio.ensure_future(self.watch_crash())
        try:
            await asyncio.wait({bench, crash}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            bench.cancel()
            crash.cancel()
            raise
        if crash.done() and not bench.done():
            # Commit the failure first; winding the benchmark down may take a moment.
            reason = crash.result()
            trial.timings["bench_s"] = time.monotonic() - t_start
            self.fail(trial, reason)
            bench.cancel()
            with contextlib.suppress(BaseException):
                await bench
            raise EngineCrashed(reason)
        crash.cancel()
        with contextlib.suppress(BaseException):
            await crash
        trial.timings["bench_s"] = time.monotonic() - t_start
        dead = self.dead_member()
        if dead is not None:
            reason = f"the engine crashed during the measured run: {dead}"
            self.fail(trial, reason)
            raise EngineCrashed(reason)
        return bench

    async def _record(
        self, trial: Trial, model: str, result: BenchResult, marks: dict[str, float]
    ) -> None:
        """Judge and store a finished benchmark: failed if too many requests failed, else done.

        A done trial gets its telemetry window and, before it is saved, the
        output-drift guard's probes on the same engine. The result is read
        through its typed properties; its dict form is what the store keeps.
        """
        completed, failed = result.completed, result.failed
        examples = result.failures.describe()
        if completed == 0:
            self.fail(trial, f"every request failed ({examples}); nothing was measured")
            return
        telemetry = await self.telemetry(marks.get("t0"), result.total_output_tokens)
        data = result.to_dict()
        server = result.server.to_dict()
        if failed > MAX_FAILED_FRACTION * (completed + failed):
            # Kept for diagnosis, but a failed trial is never ranked.
            why = (
                f"{failed} of {completed + failed} requests failed ({examples}); above "
                f"{MAX_FAILED_FRACTION:.0%} failed the figures of the rest are not comparable "
                "(fast refusals make the survivors look better)"
            )
            self.store.update_status(
                trial,
                TrialStatus.FAILED,
                failure_reason=why,
                results=data,
                server=server,
                telemetry=telemetry,
            )
            self.emit(TrialFailed(trial, why))
            return
        if self.guard is not None:
            await self.run_guard(trial, model, self.guard)
        await self.run_profile(trial, model, marks.get("ended_wall"))
        trial.untuned = await asyncio.to_thread(untuned_of_log, trial)
        self.store.save_result(trial, data, server=server, telemetry=telemetry)
        self.emit(TrialDone(trial))

    # -- output-drift guard (issue 16) ----------------------------------------------
    async def run_guard(self, trial: Trial, model: str, settings: GuardSettings) -> None:
        """Greedy probes on this engine into ``trial.guard``; their failure never fails the trial.

        The study baseline's tokens (if it has a guard) are scored teacher-forced.
        The thresholds of ``settings`` are recorded with the run, so the verdict
        read later judges it as the user asked.
        """
        assert self.engine is not None and self.engine.url is not None
        ref = await asyncio.to_thread(guard_reference, self.store, trial)
        run = await run_probes(
            self.engine.url,
            model,
            settings.probes,
            settings.tokens,
            reference=ref[1] if ref else None,
            reference_id=ref[0] if ref else None,
        )
        run.thresholds = settings.thresholds
        trial.guard = run.to_dict()
        trial.timings["guard_s"] = run.seconds

    # -- a profile after the measured run (issue 29) ---------------------------------
    async def run_profile(self, trial: Trial, model: str, measured_ended_at: float | None) -> None:
        """A profiled window on this engine into ``trial.profile``, when the trial asks for one.

        After the measured run and the guard, never during them; its failure
        never fails the trial (the record says why).
        """
        if record.wants(trial.tags) != record.CAPTURE or trial.profile is not None:
            return
        if self.profile_dir is None or self.engine is None or self.engine.url is None:
            trial.profile = record.ProfileRecord(error="the profiler was not armed").to_dict()
            return
        self.emit(TrialStage(trial.id, "profiling"))
        t0 = time.monotonic()
        taken = await capture.capture(
            self.engine.url,
            model,
            trial.workload,
            self.profile_dir,
            trial.platform,
            measured_ended_at,
        )
        trial.profile = taken.to_dict()
        trial.timings["profile_s"] = time.monotonic() - t0

    async def telemetry(self, t0: float | None, tokens: Any) -> dict[str, Any] | None:
        """The GPU window over the measured run, restricted to this engine's GPUs.

        Energy is integrated between samples, so the window is closed only once
        the sampler has a sample after its end (at most ~2 periods of waiting);
        without one, coverage stays below 1 and tokens per joule is left None
        rather than guessed. The sampler's ring buffer must span the run
        (``history`` >= run seconds x rate) for the start to be covered.
        """
        sampler = self.sampler
        if sampler is None or t0 is None:
            return None

        t1 = sampler.now()
        deadline = time.monotonic() + 2.0 / sampler.rate_hz + sampler.tick_limit_s
        while (
            sampler.running and (sampler.latest_time or -1.0) < t1 and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.01)
        # Processes of this tunelab's engines are the measurement; any other dirties a sample.
        window = sampler.window(t0, t1, own=running.engine_pids())
        if self.gpu_indices is not None:
            window = WindowSummary(
                window.t0, window.t1, tuple(g for g in window.gpus if g.index in self.gpu_indices)
            )
        out = window.to_dict()
        out["tokens_per_joule"] = window.tokens_per_joule(float(tokens)) if tokens else None
        return out

    def fail(self, trial: Trial, reason: str) -> None:
        self.store.update_status(trial, TrialStatus.FAILED, failure_reason=reason)
        self.emit(TrialFailed(trial, reason))


class WorkloadUnusable(RunFailedError):
    """The benchmark refused the trial's workload itself (no tokenizer for text prompts, an
    unreadable dataset...): the trial is already failed, and the same workload at another
    load would fail the same way. Control flow to the runner, as :class:`EngineCrashed`."""


class EngineCrashed(RunFailedError):
    """The engine died during a measured run (the trial is already marked failed).

    Control flow between the session and the runner, which catches it; a run
    failure like any other (exit 1) should it ever reach a face.
    """
