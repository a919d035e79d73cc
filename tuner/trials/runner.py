"""Runs trials: rules check, engine start, warm-up, measured run, stop — and records each step.

``run_trial`` is what every study calls; ``run_workloads`` runs several trials
that share one config on ONE engine (a concurrency sweep needs no restart).
Rules with errors skip a trial before any engine starts. Each state change is
committed to the store as it happens, so a kill at any point leaves a
truthful row. During the measured run the benchmark is raced against the
engine dying: the engine's own ``exited`` event (the server process ended)
and a watch on its long-lived members (``VLLM::EngineCore``, workers), which
vLLM's API server notices only seconds later. A crash marks the trial failed
within a few hundred milliseconds, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tuner.trials.context import RunContext, check_trial, resolve_context
from tuner.trials.events import (
    TrialBackend,
    TrialDone,
    TrialEvent,
    TrialEventCallback,
    TrialFailed,
    TrialLog,
    TrialProgress,
    TrialQueued,
    TrialSkipped,
    TrialStage,
)
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialNotFound, TrialStore, this_process

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.engine import Engine
    from tuner.engine.events import EngineEvent
    from tuner.telemetry.sampler import Sampler

WATCH_PERIOD_S = 0.1


class _Session:
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
        self.watched: list[tuple[Any, str]] = []

    # -- events ------------------------------------------------------------------
    def emit(self, event: TrialEvent) -> None:
        if self.on_event is None:
            return
        with contextlib.suppress(Exception):  # a watcher's bug must not fail the trial
            self.on_event(event)

    def on_engine_event(self, event: EngineEvent) -> None:
        from tuner.engine import proctree
        from tuner.engine.events import EngineBackendChosen, EngineLog, EngineStarting

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
    def members(self) -> list[tuple[Any, str]]:
        """Long-lived engine processes to watch: the root and vLLM's renamed core/workers."""
        import psutil

        from tuner.engine import proctree

        assert self.engine is not None
        out = []
        for pid in sorted(self.engine.tree_pids()):
            try:
                name = psutil.Process(pid).name()
            except psutil.Error:
                continue
            if pid == self.engine.pid or name.startswith("VLLM"):
                ref = proctree.ref(pid)
                if ref is not None:
                    out.append((ref, name))
        return out

    async def watch_crash(self, members: list[tuple[Any, str]]) -> str:
        """Returns the reason as soon as the engine or a watched member dies."""
        assert self.engine is not None
        exited = asyncio.ensure_future(self.engine.exited.wait())
        try:
            while True:
                if exited.done():
                    return (
                        f"the engine exited during the measured run: {self.engine.failure_reason}"
                    )
                for ref, name in members:
                    if not ref.alive():
                        return f"the engine crashed during the measured run: {name} (pid {ref.pid}) died"
                await asyncio.wait({exited}, timeout=WATCH_PERIOD_S)
        finally:
            exited.cancel()

    # -- one measurement -----------------------------------------------------------
    async def measure(self, trial: Trial, model: str) -> None:
        """Warm-up and measured run of one trial on the running engine; records the outcome."""
        from tuner.bench.runner import run_benchmark

        assert self.engine is not None and self.engine.url is not None
        self.current = trial
        wl = trial.workload
        self.store.update_status(trial, TrialStatus.MEASURING)
        self.emit(TrialStage(trial.id, "warmup" if wl.warmup_requests else "measuring"))
        sampler = self.sampler
        marks: dict[str, float] = {}
        if sampler is not None:
            marks["t0"] = sampler.now()

        def progress(p: BenchProgress) -> None:
            if "measuring" not in marks:
                marks["measuring"] = time.monotonic() - p.elapsed_s
                if sampler is not None:
                    marks["t0"] = sampler.now() - p.elapsed_s
                if wl.warmup_requests:
                    self.emit(TrialStage(trial.id, "measuring"))
            self.emit(TrialProgress(trial.id, p))

        t_start = time.monotonic()
        bench = asyncio.ensure_future(
            run_benchmark(self.engine.url, model, wl, on_progress=progress)
        )
        crash = asyncio.ensure_future(self.watch_crash(self.watched))
        try:
            await asyncio.wait({bench, crash}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            bench.cancel()
            crash.cancel()
            raise
        if crash.done() and not bench.done():
            bench.cancel()
            with contextlib.suppress(BaseException):
                await bench
            reason = crash.result()
            trial.timings["bench_s"] = time.monotonic() - t_start
            self.fail(trial, reason)
            raise _EngineCrashed(reason)
        crash.cancel()
        with contextlib.suppress(BaseException):
            await crash
        t_end = time.monotonic()
        trial.timings["bench_s"] = t_end - t_start
        try:
            result = bench.result()
        except (
            Exception
        ) as exc:  # BenchError, WorkloadError, client bugs: the trial fails, the run goes on
            self.fail(trial, f"the benchmark failed: {type(exc).__name__}: {exc}")
            return
        data = result.to_dict()
        telemetry = self.telemetry(marks.get("t0"), data.get("total_output_tokens"))
        self.store.save_result(
            trial, data, server=data.get("tunelab", {}).get("server"), telemetry=telemetry
        )
        self.emit(TrialDone(trial))

    def telemetry(self, t0: float | None, tokens: Any) -> dict[str, Any] | None:
        """The GPU window over the measured run, restricted to this engine's GPUs."""
        sampler = self.sampler
        if sampler is None or t0 is None:
            return None
        from tuner.telemetry.sampler import WindowSummary

        window = sampler.window(t0, sampler.now())
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


class _EngineCrashed(Exception):
    """The engine died during a measured run (the trial is already marked failed)."""


def _gpu_names(
    sampler: Sampler | None, indices: list[int] | None, info_name: str | None
) -> list[str]:
    if sampler is not None:
        snaps = sampler.latest() or sampler.sample_now()
        names = [s.name for s in snaps if s.name and (indices is None or s.index in indices)]
        if names:
            return names
    return [info_name] if info_name else []


async def run_workloads(
    trials: Sequence[Trial],
    store: TrialStore,
    *,
    on_event: TrialEventCallback | None = None,
    python: str = sys.executable,
    sampler: Sampler | None = None,
    startup_timeout: float = 600.0,
    context: RunContext | None = None,
    extra_env: dict[str, str] | None = None,
    gpu_indices: list[int] | None = None,
    engine_command: list[str] | None = None,
    engine_cwd: str | None = None,
) -> list[Trial]:
    """Runs trials that share one config on ONE engine, one workload after another.

    Args:
        trials: Trials with the same config (their workloads differ). Stored
            if not yet in ``store``.
        store: Where every state change is committed.
        on_event: Receives TrialEvents (on the event loop's thread).
        python: Interpreter of the environment that has vLLM.
        sampler: A running telemetry sampler, for the power/VRAM window.
        startup_timeout: Seconds the engine may take to become healthy.
        context: Target and model for the rules (default: introspected here).
        extra_env: Variables for this engine only (the GPU slot's CUDA_VISIBLE_DEVICES).
        gpu_indices: GPUs the engine uses, to restrict the telemetry window.
        engine_command: Replaces the vLLM command line — engine doubles in tests only.
        engine_cwd: Working directory of the engine process.

    Returns:
        The trials, each done, failed or skipped (never left active).

    Raises:
        ValueError: When the trials do not share one config.
        asyncio.CancelledError: When cancelled; the active trials are marked
            interrupted and the engine is stopped first.
    """
    from pathlib import Path

    from tuner import paths
    from tuner.engine import Engine, EngineSpec, EngineStartError

    if not trials:
        return []
    config = trials[0].config
    if any(t.config.config_id != config.config_id for t in trials):
        raise ValueError(
            "run_workloads needs trials of one config; run differing configs with run_trial"
        )
    t_begin = time.monotonic()
    session = _Session(store, on_event, sampler, gpu_indices)
    owner_pid, owner_created = this_process()
    for trial in trials:
        try:
            store.get(trial.id)
        except TrialNotFound:
            store.add(trial)
            session.emit(TrialQueued(trial.id, trial.study))
    if context is None:
        context = await asyncio.to_thread(resolve_context, config.model, python)
    runnable: list[Trial] = []
    for trial in trials:
        t0 = time.monotonic()
        trial.findings = check_trial(trial, context)
        trial.vllm_version = context.target.vllm_version
        trial.platform = context.target.platform
        trial.timings["rules_s"] = time.monotonic() - t0
        if any(f["severity"] == "error" for f in trial.findings):
            store.update_status(
                trial,
                TrialStatus.SKIPPED,
                failure_reason="the rules found errors; no engine was started",
            )
            session.emit(
                TrialSkipped(trial, tuple(f for f in trial.findings if f["severity"] == "error"))
            )
        else:
            runnable.append(trial)
    if not runnable:
        return list(trials)

    first = runnable[0]
    log_path = paths.trials_dir() / first.id / "engine.log"
    spec = EngineSpec(
        config=config,
        log_path=log_path,
        python=python,
        startup_timeout=startup_timeout,
        extra_env=dict(extra_env or {}),
        command=engine_command,
        cwd=Path(engine_cwd) if engine_cwd else None,
    )
    gpu_names = _gpu_names(sampler, gpu_indices, None)
    slot = (extra_env or {}).get("CUDA_VISIBLE_DEVICES")
    for trial in runnable:
        store.update_status(
            trial,
            TrialStatus.STARTING,
            started_at=time.time(),
            log_path=str(log_path),
            owner_pid=owner_pid,
            owner_created=owner_created,
            gpu_names=gpu_names,
            gpu_slot=slot,
        )
    session.group = runnable
    session.current = first
    session.emit(TrialStage(first.id, "starting", f"GPU slot {slot}" if slot else ""))
    engine = Engine(spec, on_event=session.on_engine_event)
    session.engine = engine
    pending = list(runnable)
    t_start = time.monotonic()
    try:
        try:
            await engine.start()
        except EngineStartError as err:
            for trial in pending:
                trial.timings["start_s"] = time.monotonic() - t_start
                session.fail(trial, f"the engine did not start: {err.reason}")
            pending = []
            return list(trials)
        start_s = time.monotonic() - t_start
        session.emit(TrialStage(first.id, "ready", engine.url or ""))
        for trial in runnable:
            trial.startup_seconds = engine.startup_seconds
            trial.backend_actual = engine.backend
            trial.backend_inferred = engine.backend_inferred
            trial.timings["start_s"] = start_s
            store.save(trial)
        model = engine.served_model
        session.watched = session.members()
        while pending:
            trial = pending[0]
            try:
                await session.measure(trial, model)
            except _EngineCrashed as crash:
                pending.pop(0)
                for rest in pending:
                    session.fail(
                        rest,
                        f"not measured: the shared engine crashed during trial {trial.id} ({crash})",
                    )
                pending = []
                break
            pending.pop(0)
    except BaseException:
        # Cancelled (Ctrl-C) or a bug: no trial may stay active in the store.
        for trial in pending:
            with contextlib.suppress(Exception):
                store.update_status(
                    trial, TrialStatus.INTERRUPTED, failure_reason="the run was interrupted"
                )
        raise
    finally:
        current = session.current
        if current is not None:
            session.emit(TrialStage(current.id, "stopping"))
        t_stop = time.monotonic()
        await asyncio.shield(engine.stop())
        stop_s = time.monotonic() - t_stop
        _finish(store, runnable, engine, stop_s, t_begin)
    return list(trials)


def _finish(
    store: TrialStore, trials: list[Trial], engine: Engine, stop_s: float, t_begin: float
) -> None:
    """After the engine is gone: timings, and the log's own reason for a crash."""
    from tuner.engine import logscan

    total = time.monotonic() - t_begin
    for trial in trials:
        trial.timings["stop_s"] = stop_s
        trial.timings["total_s"] = total
        trial.engine_pid = trial.engine_created = None
        if (
            trial.status is TrialStatus.FAILED
            and trial.failure_reason
            and "crashed" in trial.failure_reason
        ):
            detail = logscan.failure_reason(engine.log_tail(80), engine.returncode)
            if not detail.startswith("vLLM ") and detail not in trial.failure_reason:
                trial.failure_reason = f"{trial.failure_reason}; engine log: {detail}"
        with contextlib.suppress(Exception):
            store.save(trial)


async def run_trial(
    trial: Trial,
    store: TrialStore,
    *,
    on_event: TrialEventCallback | None = None,
    python: str = sys.executable,
    sampler: Sampler | None = None,
    startup_timeout: float = 600.0,
    context: RunContext | None = None,
    extra_env: dict[str, str] | None = None,
    gpu_indices: list[int] | None = None,
    engine_command: list[str] | None = None,
    engine_cwd: str | None = None,
) -> Trial:
    """Runs one trial end to end: rules → engine start → warm-up → measured run → stop.

    Args and behaviour as :func:`run_workloads` with a single trial.

    Returns:
        The trial: done (results recorded), failed (with the reason) or
        skipped (rule errors, no engine started).
    """
    done = await run_workloads(
        [trial],
        store,
        on_event=on_event,
        python=python,
        sampler=sampler,
        startup_timeout=startup_timeout,
        context=context,
        extra_env=extra_env,
        gpu_indices=gpu_indices,
        engine_command=engine_command,
        engine_cwd=engine_cwd,
    )
    return done[0]
