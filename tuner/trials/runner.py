"""Runs trials: rules check, engine start, warm-up, measured run, stop — and records each step.

``run_trial`` is what every study calls; ``run_workloads`` runs several trials
that share one config on ONE engine (a concurrency sweep needs no restart).
Rules with errors skip a trial before any engine starts. Each state change is
committed to the store as it happens, so a kill at any point leaves a
truthful row. During the measured run the benchmark is raced against the
engine dying: the engine's ``exited`` event fires within ~100 ms of any
process of its tree dying (vLLM's API server itself notices an engine-core
death only seconds later). A crash marks the trial failed at once, with the
reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tuner.engine import effective, proctree
from tuner.engine.spec import resolve_entry
from tuner.guard import GuardSettings, run_probes
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
from tuner.trials.guard_check import guard_reference
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialNotFound, TrialStore, this_process

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.engine import Engine
    from tuner.engine.events import EngineEvent
    from tuner.telemetry.sampler import Sampler


# A run in which more than this share of requests failed is a failed trial:
# its surviving requests saw less load and would rank the broken config first.
MAX_FAILED_FRACTION = 0.05


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
        # The output-drift guard after each measured run (None: off).
        self.guard: GuardSettings | None = GuardSettings()

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
            raise _EngineCrashed(reason)
        crash.cancel()
        with contextlib.suppress(BaseException):
            await crash
        trial.timings["bench_s"] = time.monotonic() - t_start
        # Requests to a dying server fail fast, so the benchmark can end before
        # the watch ticks: a dead engine fails the trial, whatever the numbers say.
        dead = self.dead_member()
        if dead is not None:
            reason = f"the engine crashed during the measured run: {dead}"
            self.fail(trial, reason)
            raise _EngineCrashed(reason)
        try:
            result = bench.result()
        except Exception as exc:
            self.fail(trial, f"the benchmark failed: {type(exc).__name__}: {exc}")
            return
        data = result.to_dict()
        completed = int(data.get("completed") or 0)
        failed = int(data.get("failed") or 0)
        tl = data["tunelab"]
        examples = (
            "; ".join(
                f"{tl['failures'].get(kind, 0)} x {kind}: {text}"
                for kind, text in list(tl["failure_examples"].items())[:3]
            )
            or "no detail"
        )
        if completed == 0:
            self.fail(trial, f"every request failed ({examples}); nothing was measured")
            return
        telemetry = await self.telemetry(marks.get("t0"), data.get("total_output_tokens"))
        server = data.get("tunelab", {}).get("server")
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
        from tuner.telemetry.sampler import WindowSummary

        t1 = sampler.now()
        deadline = time.monotonic() + 2.0 / sampler.rate_hz + sampler.read_timeout
        while (
            sampler.running and (sampler.latest_time or -1.0) < t1 and time.monotonic() < deadline
        ):
            await asyncio.sleep(0.01)
        window = sampler.window(t0, t1)
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


def _guard_settings(guard: bool | GuardSettings) -> GuardSettings | None:
    """The guard to run: settings as given, the defaults for True, None for False or disabled."""
    if isinstance(guard, GuardSettings):
        return guard if guard.enabled else None
    return GuardSettings() if guard else None


def _gpu_names(sampler: Sampler | None, indices: list[int] | None) -> list[str]:
    """Names of the GPUs the engine sees, from the sampler's latest snapshots (empty without GPUs)."""
    if sampler is None:
        return []
    return [s.name for s in sampler.latest() if s.name and (indices is None or s.index in indices)]


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
    guard: bool | GuardSettings = True,
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
        guard: The output-drift guard (tuner.guard) after each measured run,
            on the same engine: GuardSettings (probes, tokens, thresholds), True
            for the defaults (~8 probes x 16 tokens: seconds), False for none.

    Returns:
        The trials, each done, failed or skipped (never left active). Their
        ``timings`` hold rules_s and bench_s per trial; start_s, stop_s and
        total_s are the shared engine's (for one trial: its own).

    Raises:
        ValueError: When the trials do not share one config.
        asyncio.CancelledError: When cancelled; the active trials are marked
            interrupted and the engine is stopped first.
    """
    from pathlib import Path

    from tuner import paths
    from tuner.engine import Engine, EngineSpec

    if not trials:
        return []
    config = trials[0].config
    if any(t.config.config_id != config.config_id for t in trials):
        raise ValueError(
            "run_workloads needs trials of one config; run differing configs with run_trial"
        )
    t_begin = time.monotonic()
    session = _Session(store, on_event, sampler, gpu_indices)
    session.guard = _guard_settings(guard)
    _admit(trials, store, session)
    if context is None:
        context = await asyncio.to_thread(resolve_context, config.model, python)
    runnable = _apply_rules(trials, context, store, session)
    if not runnable:
        return list(trials)

    first = runnable[0]
    log_path = paths.trials_dir() / first.id / "engine.log"
    entry = "auto" if engine_command else await asyncio.to_thread(resolve_entry, python)
    # Recovery's proof that this engine is ours: a random token in its environment,
    # also stored in the rows (tuner.engine.proctree.proven_engine; issue 19).
    token = secrets.token_hex(16)
    spec = EngineSpec(
        config=config,
        log_path=log_path,
        python=python,
        entry=entry,  # type: ignore[arg-type]
        startup_timeout=startup_timeout,
        extra_env={**(extra_env or {}), proctree.TOKEN_ENV: token},
        command=engine_command,
        cwd=Path(engine_cwd) if engine_cwd else None,
    )
    slot = (extra_env or {}).get("CUDA_VISIBLE_DEVICES")
    _mark_starting(runnable, store, str(log_path), token, _gpu_names(sampler, gpu_indices), slot)
    session.group = runnable
    session.current = first
    session.emit(TrialStage(first.id, "starting", f"GPU slot {slot}" if slot else ""))
    await _serve(session, Engine(spec, on_event=session.on_engine_event), runnable, t_begin)
    return list(trials)


async def _serve(session: _Session, engine: Engine, runnable: list[Trial], t_begin: float) -> None:
    """The engine session: start, measure each trial in turn under crash watch, always stop.

    A start failure fails every trial with the reason; a cancel (Ctrl-C) or a
    bug marks the trials not yet final as interrupted before the engine is
    stopped, so no trial stays active in the store.
    """
    from tuner.engine import EngineStartError

    store = session.store
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
            pending.clear()
            return
        start_s = time.monotonic() - t_start
        # What vLLM really ran, from this start's log (issue 14: requested vs effective);
        # stored before "ready" so a view that reacts to it finds the mismatches.
        ran = await asyncio.to_thread(
            effective.read_effective,
            engine.spec.log_path,
            engine.spec.config.engine,
            engine.backend,
        )
        _record_ready(runnable, store, engine, start_s, ran)
        session.emit(TrialStage(runnable[0].id, "ready", engine.url or ""))
        await _measure_in_turn(session, pending, engine.served_model)
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


def _admit(trials: Sequence[Trial], store: TrialStore, session: _Session) -> None:
    """Store trials not yet in ``store`` and announce them queued."""
    for trial in trials:
        try:
            store.get(trial.id)
        except TrialNotFound:
            store.add(trial)
            session.emit(TrialQueued(trial.id, trial.study))


def _apply_rules(
    trials: Sequence[Trial], context: RunContext, store: TrialStore, session: _Session
) -> list[Trial]:
    """Record each trial's findings; skip (no engine) those with errors. Returns the runnable."""
    runnable: list[Trial] = []
    for trial in trials:
        t0 = time.monotonic()
        trial.findings = check_trial(trial, context)
        trial.vllm_version = context.target.vllm_version
        trial.platform = context.target.platform
        trial.timings["rules_s"] = time.monotonic() - t0
        errors = tuple(f for f in trial.findings if f["severity"] == "error")
        if errors:
            store.update_status(
                trial,
                TrialStatus.SKIPPED,
                failure_reason="the rules found errors; no engine was started",
            )
            session.emit(TrialSkipped(trial, errors))
        else:
            runnable.append(trial)
    return runnable


def _mark_starting(
    trials: Sequence[Trial],
    store: TrialStore,
    log_path: str,
    token: str,
    gpu_names: list[str],
    slot: str | None,
) -> None:
    """Commit STARTING with what recovery needs to find the engine (owner, token, slot)."""
    owner_pid, owner_created = this_process()
    for trial in trials:
        store.update_status(
            trial,
            TrialStatus.STARTING,
            started_at=time.time(),
            log_path=log_path,
            owner_pid=owner_pid,
            owner_created=owner_created,
            engine_token=token,
            gpu_names=gpu_names,
            gpu_slot=slot,
        )


def _record_ready(
    trials: Sequence[Trial], store: TrialStore, engine: Engine, start_s: float, ran: Any
) -> None:
    """The started engine's facts on every trial: start time, backend, what vLLM really ran."""
    for trial in trials:
        trial.startup_seconds = engine.startup_seconds
        trial.backend_actual = engine.backend
        trial.backend_inferred = engine.backend_inferred
        trial.timings["start_s"] = start_s
        trial.effective = ran.to_dict()
        trial.findings = [
            *(f for f in trial.findings if f.get("rule") != effective.RULE_ID),
            *effective.mismatch_findings(ran),
        ]
        store.save(trial)


async def _measure_in_turn(session: _Session, pending: list[Trial], model: str) -> None:
    """Measure the pending trials one after another; a crash fails the rest.

    ``pending`` is emptied as trials reach a final state, so the caller's
    interrupt handler marks only the ones still waiting.
    """
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
            pending.clear()
            return
        pending.pop(0)


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
    guard: bool | GuardSettings = True,
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
        guard=guard,
    )
    return done[0]
