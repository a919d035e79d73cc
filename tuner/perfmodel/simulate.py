"""A closed-loop run replayed step by step under fitted step costs: every request's latencies.

The wave arithmetic (:mod:`tuner.perfmodel.waves`) gives a run's duration and mean
inter-token latency in closed form, which is what the costs are fitted to. An SLO, though,
is a percentile of TTFT, ITL or end-to-end latency, and those depend on *which* request
waits: at a concurrency above max-num-seqs, the requests that do not fit queue in the engine
for a whole wave before their prefill. This module replays the run the way vLLM's scheduler
and a closed-loop client run it — the client keeps ``concurrency`` requests in flight and
sends the next one when one ends; the engine admits waiting requests up to max-num-seqs,
gives each running request one decode token per step and fills the rest of the step's token
budget (max-num-batched-tokens) with prefill chunks, first come first served; a request's
first token comes with its last prefill chunk — each step costing ``a + b x decoding
requests + c x prefilled tokens``. Where a wave's prompts fit one step's budget the
replay's duration and mean ITL equal the closed form's (a test holds them equal); where
prefill takes several chunks, the replay lets the requests already prefilled decode during the
later chunks, as vLLM does, and the closed form does not. It adds what the closed form cannot
say: every request's TTFT, ITL gaps and end-to-end latency. The schedule depends only on
step counts, never on the costs, so the replay is as cheap as the run is long in steps.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import deque
from dataclasses import dataclass, field

from tuner.perfmodel.observation import Point

__all__ = ["Replay", "replay"]

# Steps a replay may take before it is refused (a run this long is no forecast to wait for).
MAX_STEPS = 2_000_000
_KEY = re.compile(r"^(mean|median|p(\d+(?:\.\d+)?))_(ttft|itl|tpot|e2el)_ms$")


@dataclass
class _Request:
    sent: float
    prefill_left: int
    tokens: int = 0
    first: float | None = None
    last: float = 0.0


@dataclass
class Replay:
    """One replayed run.

    Attributes:
        duration_s: From the first send to the last token.
        output_tokens: Tokens generated.
        ttft_s: Each request's time to first token (send to first token).
        e2el_s: Each request's end-to-end latency.
        tpot_s: Each request's mean time per output token after the first.
        itl_s: Every inter-token gap of every request.
    """

    duration_s: float = 0.0
    output_tokens: int = 0
    ttft_s: list[float] = field(default_factory=list)
    e2el_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    itl_s: list[float] = field(default_factory=list)

    @property
    def output_throughput(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    def metric(self, key: str) -> float | None:
        """A result key's value as the benchmark reports it (``p99_ttft_ms``,
        ``output_throughput`` …); None for a key a replay cannot tell (a counter, power)."""
        if key == "output_throughput":
            return self.output_throughput
        if key == "request_throughput":
            return len(self.e2el_s) / self.duration_s if self.duration_s > 0 else 0.0
        found = _KEY.match(key)
        if found is None:
            return None
        values = {"ttft": self.ttft_s, "itl": self.itl_s, "tpot": self.tpot_s,
                  "e2el": self.e2el_s}[found.group(3)]  # fmt: skip
        if not values:
            return 0.0
        if found.group(1) == "mean":
            return statistics.fmean(values) * 1e3
        q = 50.0 if found.group(1) == "median" else float(found.group(2))
        return _percentile(sorted(values), q) * 1e3


def _percentile(ranked: list[float], q: float) -> float:
    """numpy's default (linear) percentile, as vLLM's benchmark computes it."""
    pos = (len(ranked) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ranked) - 1)
    return ranked[low] + (ranked[high] - ranked[low]) * (pos - low)


def replay(point: Point, a: float, b: float, c: float) -> Replay:
    """The run of ``point`` under step costs ``(a, b, c)`` seconds, step by step.

    Raises:
        ValueError: The run would take more than :data:`MAX_STEPS` steps.
    """
    n = point.num_prompts
    in_flight = min(point.concurrency or n, n)
    out = Replay()
    waiting: deque[_Request] = deque(_Request(0.0, point.input_len) for _ in range(in_flight))
    sent, now = in_flight, 0.0
    running: list[_Request] = []
    for _ in range(MAX_STEPS):
        while waiting and len(running) < point.max_num_seqs:
            running.append(waiting.popleft())
        if not running:
            break
        decoding = [r for r in running if r.first is not None]
        budget = max(point.max_num_batched_tokens - len(decoding), 0)
        filled: list[_Request] = []
        prefilled = 0
        for r in running:
            if r.first is None and budget > 0:
                take = min(r.prefill_left, budget)
                r.prefill_left -= take
                budget -= take
                prefilled += take
                if r.prefill_left == 0:
                    filled.append(r)
        now += a + b * len(decoding) + c * prefilled
        for r in decoding:
            out.itl_s.append(now - r.last)
            r.tokens += 1
            r.last = now
        for r in filled:
            r.first, r.last, r.tokens = now, now, 1
            out.ttft_s.append(now - r.sent)
        done = [r for r in running if r.tokens >= point.output_len]
        for r in done:
            running.remove(r)
            out.e2el_s.append(now - r.sent)
            out.output_tokens += r.tokens
            first = r.first if r.first is not None else now
            out.tpot_s.append((now - first) / (r.tokens - 1) if r.tokens > 1 else 0.0)
            if sent < n:
                waiting.append(_Request(now, point.input_len))
                sent += 1
    else:
        raise ValueError(f"a replay of {point.label()} takes more than {MAX_STEPS:,} steps")
    out.duration_s = now
    return out
