"""The server's own view of a run, from its Prometheus ``/metrics`` page.

Client-side latencies say *that* a config is slow; the server's gauges say
*why*. tunelab scrapes ``/metrics`` before, every ``interval`` seconds during,
and after a run, and keeps the peaks of KV-cache usage, waiting and running
requests plus the deltas of the preemption and prefix-cache counters (vLLM V1
names: ``vllm:kv_cache_usage_perc``, ``vllm:num_requests_waiting``,
``vllm:num_preemptions_total``, ``vllm:prefix_cache_{queries,hits}_total``).
A run whose KV cache filled up or that preempted requests is flagged with a
plain-language note, because the fix is different (more KV memory, fewer
concurrent sequences, a smaller max-num-batched-tokens) from a compute-bound
run. A server without ``/metrics`` just yields ``available=False``.

Names checked against vLLM 0.32 (vllm/v1/metrics/loggers.py: gauges
``vllm:num_requests_running``/``_waiting`` ~line 528, ``vllm:kv_cache_usage_perc``
~line 620, counters ``vllm:prefix_cache_{queries,hits}`` ~line 662 and
``vllm:num_preemptions`` ~line 739, which prometheus_client exports with a
``_total`` suffix) and older releases (``vllm:gpu_cache_usage_perc``, counters
without ``_total``). Gauges are instantaneous, so peaks are taken only over
scrapes made while tunelab had requests in flight (the first comes 0.1 s into
the run, not after a full interval: a short run used to see only its idle
before/after pages and report peak running 0); with no such scrape the peaks
are None — shown as "not sampled", never as 0. The page is the server's: a
value no vLLM exports (a KV usage outside 0..1, a negative or astronomically
large count such as 1e308, whose delta would be infinite) is dropped like a
NaN, so it can neither poison a peak nor make the result JSON unserialisable
(issue 26).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from time import perf_counter
from typing import Any

KV_BOUND_THRESHOLD = 0.90  # share of KV-cache blocks in use that counts as "full"
MAX_COUNT = 1e15  # above any request count or counter a server reaches; larger is junk


def parse_prometheus(text: str) -> dict[str, list[float]]:
    """Parse Prometheus text format into metric name -> values (one per label set).

    Only what tunelab reads is needed: comments and blank lines are skipped,
    labels are dropped, non-finite values (``NaN``, ``+Inf``) skipped, timestamps ignored.
    """
    out: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            # Skip to the closing brace outside quoted label values.
            depth_end = rest.rfind("}")
            rest = rest[depth_end + 1 :]
        else:
            name, _, rest = line.partition(" ")
        parts = rest.split()
        if not parts:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        if not math.isfinite(value):
            continue  # a NaN gauge must not become a peak
        out.setdefault(name.strip(), []).append(value)
    return out


def _first(
    metrics: dict[str, list[float]], *names: str, most: float = MAX_COUNT
) -> list[float] | None:
    """The values of the first of ``names`` exported, those in 0..``most`` only (None: none)."""
    for n in names:
        if n in metrics:
            sane = [v for v in metrics[n] if 0.0 <= v <= most]
            return sane or None
    return None


@dataclass(frozen=True)
class ServerSample:
    """One scrape, reduced to what the summary needs (None: not exported).

    ``in_flight`` is how many of tunelab's requests were open at the scrape.
    """

    t: float
    kv_usage: float | None
    running: float | None
    waiting: float | None
    preemptions: float | None
    prefix_queries: float | None
    prefix_hits: float | None
    in_flight: int = 0
    itl_sum: float | None = None
    itl_count: float | None = None


def sample_from_text(text: str, t: float, in_flight: int = 0) -> ServerSample:
    """Reduce one /metrics page (summing counters over engines, max of KV usage)."""
    m = parse_prometheus(text)

    def total(*names: str) -> float | None:
        v = _first(m, *names)
        return sum(v) if v is not None else None

    kv = _first(m, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", most=1.0)
    return ServerSample(
        t=t,
        kv_usage=max(kv) if kv else None,
        running=total("vllm:num_requests_running"),
        waiting=total("vllm:num_requests_waiting"),
        preemptions=total("vllm:num_preemptions_total", "vllm:num_preemptions"),
        prefix_queries=total("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
        prefix_hits=total("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
        in_flight=in_flight,
        # The engine's own token gaps (its output timestamps, not the HTTP stream's chunks).
        itl_sum=total(
            "vllm:inter_token_latency_seconds_sum", "vllm:time_per_output_token_seconds_sum"
        ),
        itl_count=total(
            "vllm:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_count"
        ),
    )


@dataclass(frozen=True)
class ServerSummary:
    """What the server went through during the run.

    Attributes:
        available: False when the server exports no readable /metrics.
        samples: Scrapes taken.
        busy_samples: Scrapes taken while requests were in flight (the peaks
            come from these; 0 means the peaks are None, "not sampled").
        peak_kv_cache_usage: Highest KV-cache usage seen (0..1).
        peak_waiting_requests: Most requests queued in the scheduler.
        peak_running_requests: Most requests running at once.
        preemptions: Preemptions during the run (counter delta).
        prefix_cache_hit_rate: Hits / queries during the run (None if no queries).
        kv_bound: KV cache reached KV_BOUND_THRESHOLD while requests waited.
        preempting: The server preempted requests.
        notes: Plain-language advice for the flags above.
        mean_itl_ms: The engine's mean inter-token latency over the scrapes (its
            ``inter_token_latency_seconds`` histogram's sum / count deltas): the decode
            step as the engine timed it, which a client cannot see when the stream
            delivers several tokens in one chunk. None without the histogram.
    """

    available: bool
    samples: int = 0
    busy_samples: int = 0
    peak_kv_cache_usage: float | None = None
    peak_waiting_requests: float | None = None
    peak_running_requests: float | None = None
    preemptions: float | None = None
    prefix_cache_hit_rate: float | None = None
    kv_bound: bool = False
    preempting: bool = False
    notes: list[str] = field(default_factory=list)
    mean_itl_ms: float | None = None  # last: older callers build the summary positionally

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def summarize(samples: list[ServerSample]) -> ServerSummary:
    """Peaks and deltas over the scrapes (the first one is the 'before')."""
    if not samples:
        return ServerSummary(available=False, notes=["the server exports no /metrics page"])

    busy = [s for s in samples if s.in_flight > 0]

    def peak(attr: str) -> float | None:
        vals = [getattr(s, attr) for s in busy if getattr(s, attr) is not None]
        return max(vals) if vals else None

    def delta(attr: str) -> float | None:
        vals = [getattr(s, attr) for s in samples if getattr(s, attr) is not None]
        return vals[-1] - vals[0] if vals else None

    kv = peak("kv_usage")
    waiting = peak("waiting")
    pre = delta("preemptions")
    q, h = delta("prefix_queries"), delta("prefix_hits")
    hit_rate = h / q if q and h is not None and q > 0 else None
    gaps, gap_sum = delta("itl_count"), delta("itl_sum")
    mean_itl = gap_sum / gaps * 1e3 if gaps and gap_sum is not None and gaps > 0 else None
    kv_bound = kv is not None and kv >= KV_BOUND_THRESHOLD and (waiting or 0) > 0
    preempting = bool(pre and pre > 0)
    notes: list[str] = []
    if preempting:
        notes.append(
            f"The server preempted {pre:g} request(s): the KV cache ran out and running "
            "sequences were evicted and recomputed. Latency numbers include that recompute. "
            "Give the KV cache more memory (gpu-memory-utilization, kv-cache-dtype fp8) or "
            "lower max-num-seqs / the concurrency."
        )
    if kv_bound:
        notes.append(
            f"KV-bound: the KV cache reached {kv:.0%} while up to {waiting:g} request(s) "
            "waited. Throughput here is capped by KV memory, not compute; tune memory "
            "(KV dtype, memory share, max-model-len) before kernels."
        )
    return ServerSummary(
        available=True,
        samples=len(samples),
        busy_samples=len(busy),
        peak_kv_cache_usage=kv,
        peak_waiting_requests=waiting,
        peak_running_requests=peak("running"),
        preemptions=pre,
        prefix_cache_hit_rate=hit_rate,
        mean_itl_ms=mean_itl,
        kv_bound=kv_bound,
        preempting=preempting,
        notes=notes,
    )


class ServerWatcher:
    """Scrapes /metrics before, periodically during, and after a run.

    Args:
        fetch: Coroutine returning the /metrics text or None.
        interval_s: Seconds between scrapes during the run.
        in_flight: How many requests are open now (stamped on each sample).
    """

    def __init__(
        self,
        fetch: Callable[[], Awaitable[str | None]],
        interval_s: float = 1.0,
        in_flight: Callable[[], int] | None = None,
    ) -> None:
        self._fetch = fetch
        self._interval = interval_s
        self._in_flight = in_flight or (lambda: 0)
        self.samples: list[ServerSample] = []
        self._task: asyncio.Task[None] | None = None
        self._missing = False

    async def scrape(self) -> None:
        """Take one sample now (no-op once the server proved to have none)."""
        if self._missing:
            return
        busy = self._in_flight()
        text = await self._fetch()
        if text is None:
            self._missing = not self.samples
            return
        self.samples.append(sample_from_text(text, perf_counter(), max(busy, self._in_flight())))

    async def _loop(self) -> None:
        await asyncio.sleep(min(0.1, self._interval))  # requests are in flight by now
        while True:
            await self.scrape()
            await asyncio.sleep(self._interval)

    async def start(self) -> None:
        """The 'before' scrape, then periodic ones in the background."""
        await self.scrape()
        if not self._missing:
            self._task = asyncio.create_task(self._loop())

    async def stop(self) -> ServerSummary:
        """Stop the background scrapes, take the 'after' one, summarise."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.scrape()
        return summarize(self.samples)
