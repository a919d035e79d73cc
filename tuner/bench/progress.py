"""Live progress of a run, throttled for screens: at most ~10 events a second.

The TUI and the CLI's Rich display both want "how far, how fast, how good so
far" while a run streams. A background ticker reads the client's counters and
the records finished so far and calls the listener; it never runs on the
token path, so progress costs the measurement nothing but a timer. Running
percentiles use the most recent values only (bounded windows), so each tick
is O(window), not O(run).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

from tuner.bench.client import LiveCounters, RequestRecord
from tuner.bench.metrics import percentile

MIN_INTERVAL_S = 0.1  # ≤ 10 events per second
_WINDOW = 2000  # recent values kept for running percentiles
_RATE_WINDOW_S = 2.0  # rolling tokens/s window


@dataclass(frozen=True)
class BenchProgress:
    """One progress event.

    Attributes:
        phase: "warmup", "running" or "done".
        done: Counted requests finished (ok or failed).
        failed: Of those, failed.
        total: Requests planned (None for duration-bound runs).
        elapsed_s: Seconds since the measured part began.
        tokens_per_s: Output tokens/s over the last ~2 s (tuner.bench.record.LiveCounters:
            chunks as they stream, each request settled to its token count as it ends).
        ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms: Running percentiles
            over recent requests (None before the first).
    """

    phase: str
    done: int
    failed: int
    total: int | None
    elapsed_s: float
    tokens_per_s: float
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None


ProgressCallback = Callable[[BenchProgress], None]


class ProgressReporter:
    """Turns counters and finished records into throttled BenchProgress events."""

    def __init__(
        self,
        callback: ProgressCallback | None,
        live: LiveCounters,
        total: int | None,
        interval_s: float = 0.2,
    ) -> None:
        self._cb = callback
        self._live = live
        self._total = total
        self._interval = max(MIN_INTERVAL_S, interval_s)
        self._ttfts: deque[float] = deque(maxlen=_WINDOW)
        self._itls: deque[float] = deque(maxlen=_WINDOW)
        self._rate: deque[tuple[float, int]] = deque()
        self._t0 = perf_counter()
        self._last_emit = 0.0
        self._task: asyncio.Task[None] | None = None
        self.phase = "running"

    def record_done(self, rec: RequestRecord) -> None:
        """Feed a finished counted request into the running percentiles."""
        if self._cb is not None and rec.success:
            self._ttfts.append(rec.ttft * 1000.0)
            self._itls.extend(g * 1000.0 for g in rec.itls[-64:])

    def snapshot(self) -> BenchProgress:
        """The current progress (also usable without a callback)."""
        now = perf_counter()
        self._rate.append((now, self._live.tokens))
        while len(self._rate) > 2 and now - self._rate[0][0] > _RATE_WINDOW_S:
            self._rate.popleft()
        t_old, c_old = self._rate[0]
        rate = (self._live.tokens - c_old) / (now - t_old) if now > t_old else 0.0
        ttfts, itls = list(self._ttfts), list(self._itls)
        return BenchProgress(
            phase=self.phase,
            done=self._live.done + self._live.failed,
            failed=self._live.failed,
            total=self._total,
            elapsed_s=now - self._t0,
            tokens_per_s=rate,
            ttft_p50_ms=percentile(ttfts, 50) if ttfts else None,
            ttft_p99_ms=percentile(ttfts, 99) if ttfts else None,
            itl_p50_ms=percentile(itls, 50) if itls else None,
            itl_p99_ms=percentile(itls, 99) if itls else None,
        )

    def emit(self, force: bool = False) -> None:
        """Call the listener unless the last event was under MIN_INTERVAL_S ago."""
        if self._cb is None:
            return
        now = perf_counter()
        if not force and now - self._last_emit < MIN_INTERVAL_S:
            return
        self._last_emit = now
        self._cb(self.snapshot())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self.emit()

    def start(self) -> None:
        """Begin periodic events (no task at all without a listener)."""
        self._t0 = perf_counter()
        self._rate.clear()
        self._rate.append((self._t0, self._live.tokens))
        if self._cb is not None:
            self._task = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        """Stop ticking and send the final 'done' event."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.phase = "done"
        if self._cb is not None:
            # Keep the promise of at most one event per MIN_INTERVAL_S, even for the last.
            wait = self._last_emit + MIN_INTERVAL_S - perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
        self.emit(force=True)
