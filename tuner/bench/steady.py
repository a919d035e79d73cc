"""The steady-state part of a run: from full load to the start of the drain (issue 30).

A closed-loop run (``concurrency`` C, all arrivals at once, N > C requests)
ramps up while its first C requests are sent and prefilled together, holds C
requests in flight while each finished request is replaced, and drains once
the last request has been sent: from then on nothing replaces a finished
request and the load falls to zero. Whole-run figures mix the three; the
steady window is the middle one — from the moment C requests were in flight
to the moment the last request was sent — and its output throughput counts
the tokens that arrived inside it over its length. A run with no such middle
(N <= C: one wave; an open-loop rate, whose load is never held) has no steady
window, and says why.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.bench.record import RequestRecord
from tuner.bench.workload import Workload


@dataclass(frozen=True)
class SteadyWindow:
    """The steady part of a run, in seconds from its first request's send.

    Attributes:
        start_s: When ``concurrency`` requests were first in flight.
        end_s: When the last request was sent (the drain begins).
        output_tokens: Token chunks that arrived inside the window.
        output_throughput: ``output_tokens`` over the window's length (tok/s).
        requests: Requests sent inside the window.
        median_ttft_ms: TTFT of the requests sent inside it, median.
    """

    start_s: float
    end_s: float
    output_tokens: int
    output_throughput: float
    requests: int
    median_ttft_ms: float

    @property
    def duration_s(self) -> float:
        """The window's length."""
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the result's ``tunelab.steady``)."""
        return {
            "start_s": round(self.start_s, 4),
            "end_s": round(self.end_s, 4),
            "duration_s": round(self.duration_s, 4),
            "output_tokens": self.output_tokens,
            "output_throughput": self.output_throughput,
            "requests": self.requests,
            "median_ttft_ms": self.median_ttft_ms,
        }


def no_window_reason(workload: Workload, sent: int) -> str | None:
    """Why a run of ``sent`` requests has no steady window (None when it may have one)."""
    conc = workload.concurrency
    if not math.isinf(workload.request_rate):
        return "an open-loop rate: the load is never held at a level"
    if not conc:
        return "every request at once: one wave, ramp-up and drain only"
    if sent <= conc:
        return f"{sent} requests at concurrency {conc}: one wave, no replaced request"
    return None


def steady_window(records: Sequence[RequestRecord], concurrency: int) -> SteadyWindow | None:
    """The steady window of a closed-loop run's records (None when it has no length)."""
    ok = sorted(records, key=lambda r: r.start)  # every record was sent (a failed one too)
    if len(ok) <= concurrency:
        return None
    t0 = ok[0].start
    start = ok[concurrency - 1].start  # the C-th send: C in flight from here
    end = ok[-1].start  # the last send: the drain begins
    if end <= start:
        return None
    tokens = sum(1 for r in ok for t in r.chunk_times if start <= t <= end)
    inside = [r for r in ok if start <= r.start <= end and r.success and r.chunk_times]
    return SteadyWindow(
        start_s=start - t0,
        end_s=end - t0,
        output_tokens=tokens,
        output_throughput=tokens / (end - start),
        requests=len(inside),
        median_ttft_ms=statistics.median(r.ttft for r in inside) * 1e3 if inside else 0.0,
    )
