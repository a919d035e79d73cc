"""Runs trials: rules check, engine start, warm-up, measured run, stop — and records each step.

``run_trial`` is what every study calls; ``run_workloads`` runs several trials
that share one config on ONE engine (a concurrency sweep needs no restart);
each measured run is :class:`tuner.trials.session.EngineSession`'s.
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
import dataclasses
import secrets
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner import environment, paths
from tuner.engine import (
    Engine,
    EngineSpec,
    EngineStartError,
    cpu_layout,
    effective,
    logscan,
    proctree,
)
from tuner.engine.spec import resolve_entry
from tuner.guard import GuardSettings
from tuner.profiles import capture, record
from tuner.profiles.trace import TraceError
from tuner.rules import blocking
from tuner.rules.policy import RULE_ID as POLICY_RULE
from tuner.trials.context import RunContext, check_trial, mismatch_findings, resolve_context
from tuner.trials.events import TrialEventCallback, TrialQueued, TrialSkipped, TrialStage
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.session import (
    MAX_FAILED_FRACTION,
    EngineCrashed,
    EngineSession,
    WorkloadUnusable,
)
from tuner.trials.store import TrialNotFound, TrialStore, this_process

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.telemetry.sampler import Sampler

__all__ = ["MAX_FAILED_FRACTION", "RunContext", "run_trial", "run_workloads"]


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
    client_process: bool = False,
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
        client_process: Run each benchmark client in a process of its own
            (tuner.bench.own_process): for trials side by side and under a UI;
            otherwise on its own event loop in a thread.

    Returns:
        The trials, each done, failed or skipped (never left active). Their
        ``timings`` hold rules_s and bench_s per trial; start_s, stop_s and
        total_s are the shared engine's (for one trial: its own).

    Raises:
        ValueError: When the trials do not share one config.
        asyncio.CancelledError: When cancelled; the active trials are marked
            interrupted and the engine is stopped first.
    """
    if not trials:
        return []
    config = _one_config(trials)
    t_begin = time.monotonic()
    session = EngineSession(store, on_event, sampler, gpu_indices)
    session.guard = _guard_settings(guard)
    session.client_process = client_process
    _admit(trials, store, session)
    if context is None:
        context = await asyncio.to_thread(resolve_context, config.model, python)
    session.model_info = context.model_info
    runnable = _apply_rules(trials, context, store, session)
    if not runnable:
        return list(trials)

    first = runnable[0]
    spec, token = await _engine_spec(
        first, python, startup_timeout, extra_env, engine_command, engine_cwd
    )
    session.profile_dir = _arm_profiler(spec, runnable)
    slot = (extra_env or {}).get("CUDA_VISIBLE_DEVICES")
    _mark_starting(
        runnable, store, str(spec.log_path), token, _gpu_names(sampler, gpu_indices), slot
    )
    session.group = runnable
    session.current = first
    session.emit(TrialStage(first.id, "starting", f"GPU slot {slot}" if slot else ""))
    await _serve(session, Engine(spec, on_event=session.on_engine_event), runnable, t_begin)
    return list(trials)


def _one_config(trials: Sequence[Trial]) -> EngineConfig:
    """The config every trial shares (one engine serves them all).

    Raises:
        ValueError: When the trials do not share one config.
    """
    config = trials[0].config
    if any(t.config.config_id != config.config_id for t in trials):
        raise ValueError(
            "run_workloads needs trials of one config; run differing configs with run_trial"
        )
    return config


async def _engine_spec(
    first: Trial,
    python: str,
    startup_timeout: float,
    extra_env: dict[str, str] | None,
    engine_command: list[str] | None,
    engine_cwd: str | None,
) -> tuple[EngineSpec, str]:
    """The engine of ``first``'s config and its recovery token.

    The log goes under the first trial's folder. The token, a random value in
    the engine's environment also stored in the rows, is recovery's proof that
    the engine is ours (tuner.engine.proctree.proven_engine; issue 19).
    """
    entry = "auto" if engine_command else await asyncio.to_thread(resolve_entry, python)
    token = secrets.token_hex(16)
    spec = EngineSpec(
        config=first.config,
        log_path=paths.trials_dir() / first.id / "engine.log",
        python=python,
        entry=entry,  # type: ignore[arg-type]
        startup_timeout=startup_timeout,
        extra_env={**(extra_env or {}), proctree.TOKEN_ENV: token},
        command=engine_command,
        cwd=Path(engine_cwd) if engine_cwd else None,
    )
    return spec, token


def _arm_profiler(spec: EngineSpec, trials: Sequence[Trial]) -> Path | None:
    """Arms vLLM's profiler on ``spec`` when a trial asks (tuner.profiles.capture); its folder.

    The profiler records nothing until a trial's measured run is over. A vLLM
    without one is recorded on the trials that asked for a capture, which then
    run unprofiled.
    """
    if not any(record.wants(t.tags) for t in trials):
        return None
    folder = spec.log_path.parent / "profile"
    try:
        args, env = capture.launch_options(folder, trials[0].vllm_version)
    except TraceError as exc:
        for trial in trials:
            if record.wants(trial.tags) == record.CAPTURE:
                trial.profile = record.ProfileRecord(error=str(exc)).to_dict()
        return None
    folder.mkdir(parents=True, exist_ok=True)
    spec.extra_args = [*spec.extra_args, *args]
    spec.extra_env = {**spec.extra_env, **env}
    return folder


async def _serve(
    session: EngineSession, engine: Engine, runnable: list[Trial], t_begin: float
) -> None:
    """The engine session: start, measure each trial in turn under crash watch, always stop.

    A start failure fails every trial with the reason; a cancel (Ctrl-C) or a
    bug marks the trials not yet final as interrupted before the engine is
    stopped, so no trial stays active in the store.
    """
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
        # What it ran on: one small subprocess per interpreter and process (cached).
        software = await asyncio.to_thread(environment.software, engine.spec.python)
        layout = await _lay_out(engine, runnable[0].platform)
        _record_ready(runnable, store, engine, start_s, ran, software, layout)
        session.emit(TrialStage(runnable[0].id, "ready", engine.url or ""))
        await _measure_in_turn(session, pending, engine.served_model)
    except BaseException:
        # Cancelled (Ctrl-C) or a bug: no trial may stay active in the store.
        for trial in pending:
            with contextlib.suppress(Exception):
                store.update_status(
                    trial,
                    TrialStatus.INTERRUPTED,
                    failure_reason=f"the run was interrupted while the trial was {trial.status}",
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


def _admit(trials: Sequence[Trial], store: TrialStore, session: EngineSession) -> None:
    """Store trials not yet in ``store`` and announce them queued."""
    for trial in trials:
        try:
            store.get(trial.id)
        except TrialNotFound:
            store.add(trial)
            session.emit(TrialQueued(trial.id, trial.study))


def _apply_rules(
    trials: Sequence[Trial], context: RunContext, store: TrialStore, session: EngineSession
) -> list[Trial]:
    """Record each trial's findings; skip (no engine) those with errors. Returns the runnable."""
    runnable: list[Trial] = []
    for trial in trials:
        t0 = time.monotonic()
        trial.findings = check_trial(trial, context)
        trial.vllm_version = context.target.vllm_version
        trial.platform = context.target.platform
        trial.timings["rules_s"] = time.monotonic() - t0
        errors = tuple(blocking(trial.findings))
        if errors:
            refused = [f for f in errors if f.rule == POLICY_RULE]
            store.update_status(
                trial,
                TrialStatus.SKIPPED,
                failure_reason=(
                    f"refused by tunelab's policy, no engine was started: {refused[0].message}"
                    if refused
                    else "the rules found errors; no engine was started"
                ),
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


async def _lay_out(engine: Engine, platform: str | None) -> dict[str, str]:
    """On CPU, the engine's busy-polling processes beside its worker, the API server apart
    (tuner.engine.cpu_layout); what was done, for the trial's environment."""
    if platform != "cpu" or engine.pid is None:
        return {}
    made = await asyncio.to_thread(cpu_layout.split, engine.pid, engine.tree_pids())
    if made.reason:
        return {"cpu_layout": f"not split: {made.reason}"}
    cores = ",".join(str(c) for c in sorted(made.engine_cores))
    rest = ",".join(str(c) for c in sorted(made.server_cores))
    return {"cpu_layout": f"engine on cores {cores}, API server on {rest}"}


def _record_ready(
    trials: Sequence[Trial],
    store: TrialStore,
    engine: Engine,
    start_s: float,
    ran: Any,
    software: environment.Fingerprint,
    layout: dict[str, str],
) -> None:
    """The started engine's facts on every trial: start time, backend, what vLLM really ran,
    and what it ran on (``software`` plus the GPUs the trial's engine could see, and the CPU
    engine's process layout)."""
    for trial in trials:
        names = trial.gpu_names or []
        gpus = {"gpu_name": names[0], "gpu_count": len(names)} if names else {}
        trial.environment = {**software.to_dict(), **gpus, **layout}
        trial.startup_seconds = engine.startup_seconds
        trial.backend_actual = engine.backend
        trial.backend_inferred = engine.backend_inferred
        trial.timings["start_s"] = start_s
        trial.effective = ran.to_dict()
        trial.findings = [
            *(f for f in trial.findings if f.rule != effective.RULE_ID),
            *mismatch_findings(ran),
        ]
        store.save(trial)


async def _measure_in_turn(session: EngineSession, pending: list[Trial], model: str) -> None:
    """Measure the pending trials one after another; a crash fails the rest.

    ``pending`` is emptied as trials reach a final state, so the caller's
    interrupt handler marks only the ones still waiting.
    """
    while pending:
        trial = pending[0]
        try:
            await session.measure(trial, model)
        except WorkloadUnusable as refused:
            # The workload itself cannot run: its other loads (a capacity's probes, a
            # concurrency sweep) are not run to fail alike; other workloads still are.
            pending.pop(0)
            for rest in [t for t in pending if _same_but_load(t.workload, trial.workload)]:
                pending.remove(rest)
                session.fail(rest, f"not measured: the same workload failed on trial "
                                   f"{trial.short_id}: {refused}")  # fmt: skip
            continue
        except EngineCrashed as crash:
            pending.pop(0)
            for rest in pending:
                session.fail(
                    rest,
                    f"not measured: the shared engine crashed during trial {trial.id} ({crash})",
                )
            pending.clear()
            return
        pending.pop(0)


_LOAD_FIELDS = ("concurrency", "request_rate", "num_prompts", "burstiness", "duration_s")


def _same_but_load(one: Workload, other: Workload) -> bool:
    """Whether two workloads differ in their load alone (what a capacity probe changes)."""
    return dataclasses.replace(one, **{f: getattr(other, f) for f in _LOAD_FIELDS}) == other


def _finish(
    store: TrialStore, trials: list[Trial], engine: Engine, stop_s: float, t_begin: float
) -> None:
    """After the engine is gone: timings, and the log's own reason for a crash."""
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
    client_process: bool = False,
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
        client_process=client_process,
    )
    return done[0]
