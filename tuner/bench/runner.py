"""One benchmark run end to end: resolve, warm up, send on schedule, measure.

``run_benchmark`` is the single entry point the CLI, the TUI and the trial
code call. It asks the server for its model when none is given, builds the
prompts (seeded), sends the warm-ups and waits for them, then releases the
counted requests on their schedule — gamma-distributed arrivals at
``request_rate`` as in `vllm bench serve` (including its rescaling of the
arrival times to exactly num_prompts / rate), capped at ``concurrency``
requests in flight — while a watcher scrapes the server's /metrics and a
reporter emits throttled progress. Every request carries its own timeouts,
and the run as a whole has a deadline and stops after repeated failures
(tuner.bench.run_limits), so a run always ends, and soon when the server fails
every request. The result uses vLLM's key names plus a ``tunelab`` block.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from time import perf_counter

from tuner.bench.client import (
    BenchClient,
    LiveCounters,
    RequestRecord,
    TransportFactory,
    cancel_all,
)
from tuner.bench.endpoint import refuse_missing_endpoint, url_and_headers
from tuner.bench.host_noise import HostNoise, HostNoiseMeter
from tuner.bench.metrics import (
    compute_metrics,
)
from tuner.bench.progress import ProgressCallback, ProgressReporter
from tuner.bench.prompt_source import build_prompts, build_sessions, resolve_model
from tuner.bench.prompts import Prompt, TokenPool
from tuner.bench.result import BenchResult, vllm_date
from tuner.bench.run_limits import (
    DEFAULT_MAX_CONSECUTIVE_FAILURES,
    BenchStopped,
    RunGuard,
    check_options,
    run_deadline_s,
)
from tuner.bench.server_metrics import ServerSummary, ServerWatcher
from tuner.bench.sessions import SessionPlan, run_sessions, worst_turn_metrics
from tuner.bench.workload import DatasetKind, Workload, WorkloadError

__all__ = ["BenchResult", "arrival_offsets", "run_benchmark", "vllm_date"]


def arrival_offsets(workload: Workload, count: int) -> list[float]:
    """Seconds after the start at which each counted request is released.

    Gamma inter-arrival gaps (shape = burstiness, mean = 1 / rate), rescaled so
    the last arrival lands at count / rate exactly — vLLM's get_request logic,
    seeded with the workload's seed.
    """
    rate = workload.request_rate
    if math.isinf(rate):
        return [0.0] * count
    rng = random.Random(workload.seed * 7919 + 17)
    shape = workload.burstiness
    theta = 1.0 / (rate * shape)
    t, out = 0.0, []
    for _ in range(count):
        t += rng.gammavariate(shape, theta)
        out.append(t)
    if out[-1] > 0:
        scale = (count / rate) / out[-1]
        out = [x * scale for x in out]
    return out


def _open_arrivals(workload: Workload) -> Iterator[float]:
    """Endless arrival offsets for duration-bound runs (no rescaling)."""
    rng = random.Random(workload.seed * 7919 + 17)
    rate, shape = workload.request_rate, workload.burstiness
    t = 0.0
    while True:
        if not math.isinf(rate):
            t += rng.gammavariate(shape, 1.0 / (rate * shape))
        yield t


async def _warmup(client: BenchClient, prompts: list[Prompt], concurrency: int | None) -> None:
    sem = asyncio.Semaphore(concurrency or len(prompts))
    live = LiveCounters()

    async def one(p: Prompt) -> None:
        async with sem:
            await client.send(p, live)

    await asyncio.gather(*(one(p) for p in prompts))


@dataclass
class _Prepared:
    """What is ready before the clock starts.

    Attributes:
        prompts: The counted prompts (empty for sessions: built turn by turn).
        source: Where prompt tokens came from.
        offsets: Arrival offsets (empty for duration-bound runs and sessions).
        trace_reuse: A trace's block-reuse ratio, else None.
        sessions: A sessions run's conversations, else None.
        pool: The token pool sessions count their context with.
        turns_cut: Set by the measured part: turns the context limit cut.
    """

    prompts: list[Prompt]
    source: str
    offsets: list[float]
    trace_reuse: float | None = None
    sessions: SessionPlan | None = None
    pool: TokenPool | None = None
    turns_cut: int = 0


async def _prepare(
    client: BenchClient,
    workload: Workload,
    tokenizer_path: str | None,
    model: str | None,
    guard: RunGuard,
) -> _Prepared:
    """Before the clock starts: the counted prompts (or conversations) and their schedule.

    Asks the server for its model when none was given (setting ``client.model``),
    builds the seeded prompts, sets the run's deadline from them (unless one
    was given) and sends the warm-ups, waiting for all of them. The offsets
    are empty for a duration-bound run (its arrivals are open-ended).
    """
    root = None
    if not model:
        client.model, root = await resolve_model(client)
    if workload.source_kind is DatasetKind.SESSIONS:
        plan, warm, pool = await build_sessions(client, workload, tokenizer_path, model, root)
        turns = [Prompt("", -1, n) for c in plan.conversations for n in c.output_lens]
        think = max(sum(c.think_s) for c in plan.conversations)
        waves = math.ceil(len(plan.conversations) / (workload.concurrency or len(turns)))
        guard.derive(run_deadline_s(workload, turns, warm, think * waves))
        ready = _Prepared([], pool.source, [], sessions=plan, pool=pool)
    else:
        prompts, warm, source, trace = await build_prompts(
            client, workload, tokenizer_path, model, root
        )
        offsets: list[float] = []
        if workload.duration_s is None:
            offsets = trace.offsets if trace else arrival_offsets(workload, len(prompts))
        guard.derive(run_deadline_s(workload, prompts, warm, max(offsets, default=0.0)))
        ready = _Prepared(prompts, source, offsets, trace.block_reuse if trace else None)
    if warm:
        await _warmup(client, warm, workload.concurrency)
    return ready


def _refuse_unbounded(workload: Workload) -> None:
    """A duration-bound run with no cap on requests in flight would never stop opening them.

    Raises:
        WorkloadError: Neither --concurrency nor a finite --request-rate bounds the run.
    """
    if (
        workload.duration_s is not None
        and math.isinf(workload.request_rate)
        and not workload.concurrency
    ):
        raise WorkloadError(
            "a duration-bound run needs --concurrency or a finite --request-rate, "
            "else it would open requests without limit"
        )


@dataclass
class _Dispatch:
    """The measured part of a run: releases counted requests on schedule and gathers them.

    Kept as one object so the request coroutine, the two release loops and the
    watcher's in-flight count share the same task list, counters and semaphore.

    Attributes:
        client: The open client requests go through.
        prompts: The counted prompts (reused round-robin in duration-bound runs).
        bodies: The request bodies, built once per prompt before the clock starts.
        live: Counters the reporter and the watcher read while requests run.
        reporter: Emits throttled progress.
        sem: Caps requests in flight at the workload's concurrency (None: no cap).
        tasks: Every request task started so far.
    """

    client: BenchClient
    prompts: list[Prompt]
    bodies: list[bytes]
    live: LiveCounters
    reporter: ProgressReporter
    sem: asyncio.Semaphore | None
    tasks: list[asyncio.Task[RequestRecord]] = field(default_factory=list)

    def in_flight(self) -> int:
        """Requests started and not yet finished (for the /metrics watcher)."""
        return len(self.tasks) - self.live.done - self.live.failed

    async def one(self, i: int, arrival: float, held: bool) -> RequestRecord:
        """Send request ``i``; ``held`` means its semaphore slot was taken by the caller."""
        k = i % len(self.prompts)
        try:
            if self.sem is not None and not held:
                async with self.sem:
                    rec = await self.client.send(
                        self.prompts[k], self.live, self.bodies[k], arrival
                    )
            else:
                rec = await self.client.send(self.prompts[k], self.live, self.bodies[k], arrival)
        finally:
            if held and self.sem is not None:
                self.sem.release()
        self.reporter.record_done(rec)
        return rec

    async def turn(self, prompt: Prompt, arrival: float) -> RequestRecord:
        """Send one conversation turn as a counted task (tuner.bench.sessions), answer kept."""
        send = self.client.send(prompt, self.live, None, arrival, keep_answer=True)
        task = asyncio.create_task(send)
        self.tasks.append(task)
        rec = await task
        self.reporter.record_done(rec)
        return rec

    async def release_counted(self, t0: float, offsets: list[float]) -> None:
        """Start one task per prompt at its arrival offset after ``t0``."""
        for i, off in enumerate(offsets):
            wait = t0 + off - perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            self.tasks.append(asyncio.create_task(self.one(i, perf_counter(), False)))

    async def release_for_duration(self, t0: float, duration_s: float, workload: Workload) -> None:
        """Start tasks on open arrivals until ``duration_s`` after ``t0``.

        With an infinite rate (closed loop) a slot is taken before each start,
        so exactly ``concurrency`` requests stay in flight.
        """
        closed_loop = math.isinf(workload.request_rate)
        end = t0 + duration_s
        for i, off in enumerate(_open_arrivals(workload)):
            wait = t0 + off - perf_counter()
            if wait > 0:
                await asyncio.sleep(min(wait, max(0.0, end - perf_counter())))
            if closed_loop and self.sem is not None:
                await self.sem.acquire()
            if perf_counter() >= end:
                if closed_loop and self.sem is not None:
                    self.sem.release()
                break
            self.tasks.append(asyncio.create_task(self.one(i, perf_counter(), closed_loop)))


async def _measure(
    dispatch: _Dispatch, watcher: ServerWatcher, workload: Workload, ready: _Prepared
) -> tuple[list[RequestRecord], float]:
    """Release the counted requests and wait for all of them: (records, duration in s).

    On any exception (a cancelled or guard-stopped run included) the requests
    still open are cancelled and the watcher and reporter stopped before it
    propagates.
    """
    dispatch.reporter.start()
    t0 = perf_counter()
    try:
        if ready.sessions is not None:
            chat = workload.endpoint == "chat"
            records, ready.turns_cut = await run_sessions(ready.sessions, dispatch.turn, chat=chat,
                                               pool=ready.pool, concurrency=workload.concurrency)  # fmt: skip
        elif workload.duration_s is None:
            await dispatch.release_counted(t0, ready.offsets)
        else:
            await dispatch.release_for_duration(t0, workload.duration_s, workload)
        if ready.sessions is None:
            records = list(await asyncio.gather(*dispatch.tasks))
    except BaseException:
        await cancel_all(dispatch.tasks)
        await watcher.stop()
        await dispatch.reporter.stop()
        raise
    return records, perf_counter() - t0


@dataclass
class _Measured:
    """What the measured part of a run produced, before it becomes a BenchResult."""

    records: list[RequestRecord]
    duration_s: float
    server: ServerSummary
    started_at: str
    source: str
    host_noise: HostNoise | None
    trace_block_reuse: float | None
    turns_cut: int = 0


async def run_benchmark(
    url: str,
    model: str | None,
    workload: Workload,
    *,
    on_progress: ProgressCallback | None = None,
    tokenizer_path: str | None = None,
    metrics_interval_s: float = 1.0,
    headers: dict[str, str] | None = None,
    transport_factory: TransportFactory | None = None,
    also_own: set[int] | None = None,
    deadline_s: float | None = None,
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES,
) -> BenchResult:
    """Benchmark the OpenAI-compatible server at ``url`` with ``workload``.

    Args:
        url: Base URL, e.g. ``http://127.0.0.1:8000``.
        model: Model name for requests; None asks the server's /v1/models.
        workload: What to send.
        on_progress: Called with BenchProgress at most ~10 times a second.
        tokenizer_path: tokenizer.json or model dir for exact random prompts;
            default: the model's root dir if local, else the server's /tokenize.
        metrics_interval_s: Seconds between /metrics scrapes during the run.
        headers: Extra headers (Authorization ...); URL userinfo becomes Basic auth instead.
        transport_factory: Makes the streaming transport (default: the lean one).
        also_own: More processes whose CPU is the run's own (tuner.bench.own_process).
        deadline_s: The whole run's deadline in seconds; None derives one from
            the workload (tuner.bench.run_limits.run_deadline_s).
        max_consecutive_failures: Failed requests in a row that stop the run.

    Returns:
        The BenchResult (failed requests are counted in it, not raised).

    Raises:
        BenchError: The server is unreachable or serves no model.
        BenchStopped: The run passed its deadline or failed too often (a BenchError).
        WorkloadError: The workload or its dataset is unusable.
        GuardOptionError: ``deadline_s`` or ``max_consecutive_failures`` is unusable.
    """
    url, headers = url_and_headers(url, headers)
    _refuse_unbounded(workload)
    check_options(deadline_s, max_consecutive_failures)
    guard = RunGuard(max_consecutive_failures)
    async with BenchClient(
        url,
        model or "",
        workload.endpoint,
        concurrency=workload.concurrency,
        request_timeout_s=workload.request_timeout_s,
        stall_timeout_s=workload.stall_timeout_s,
        headers=headers,
        transport_factory=transport_factory,
        on_end=guard.record,
    ) as client:
        try:
            async with guard.bounded(deadline_s):
                run = await _run(
                    client, workload, guard, tokenizer_path, model, on_progress,
                    metrics_interval_s, also_own,
                )  # fmt: skip
        except BenchStopped:
            refuse_missing_endpoint(client, guard)
            raise
        refuse_missing_endpoint(client, guard)
    return _result(url, client.model, workload, run)


def _result(url: str, model: str, workload: Workload, run: _Measured) -> BenchResult:
    """The measured run's result: vLLM's metrics, a sessions run's per-turn TTFT bounds."""
    return BenchResult(
        url=url,
        model=model,
        workload=workload,
        metrics={
            **compute_metrics(run.records, run.duration_s, workload.slo, detailed=True),
            **worst_turn_metrics(run.records),
        },
        server=run.server,
        records=run.records,
        started_at=run.started_at,
        prompt_source=run.source,
        host_noise=run.host_noise,
        trace_block_reuse=run.trace_block_reuse,
        turns_cut=run.turns_cut,
    )


async def _run(
    client: BenchClient,
    workload: Workload,
    guard: RunGuard,
    tokenizer_path: str | None,
    model: str | None,
    on_progress: ProgressCallback | None,
    metrics_interval_s: float,
    also_own: set[int] | None,
) -> _Measured:
    """Prepare, warm up and measure on the open client (run_benchmark's body, under the guard)."""
    ready = await _prepare(client, workload, tokenizer_path, model, guard)
    live = LiveCounters()
    total = None if workload.duration_s is not None else len(ready.prompts)
    if ready.sessions is not None:
        total = ready.sessions.requests
    dispatch = _Dispatch(
        client=client,
        prompts=ready.prompts,
        bodies=[client.body(p) for p in ready.prompts],
        live=live,
        reporter=ProgressReporter(on_progress, live, total),
        sem=asyncio.Semaphore(workload.concurrency) if workload.concurrency else None,
    )
    watcher = ServerWatcher(
        lambda: client.get_text("/metrics"), metrics_interval_s, in_flight=dispatch.in_flight
    )
    await watcher.start()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    meter = HostNoiseMeter.for_url(client.base_url, also_own)
    meter.start()
    records, duration = await _measure(dispatch, watcher, workload, ready)
    host_noise = meter.stop()
    await dispatch.reporter.stop()
    server = await watcher.stop()
    return _Measured(records, duration, server, started_at, ready.source, host_noise,
                     ready.trace_reuse, ready.turns_cut)  # fmt: skip
