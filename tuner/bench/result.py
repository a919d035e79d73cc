"""A finished benchmark run: its records, its vLLM-compatible metrics and tunelab's own figures.

``BenchResult`` is what :func:`tuner.bench.runner.run_benchmark` returns and what the CLI,
the TUI and the trials read: vLLM's key names (``--json``, stored with a trial) plus the
``tunelab`` block — failures and flags by kind, the server's own view, host noise, a trace's
block reuse, the steady window (tuner.bench.steady) and a sessions run's per-turn figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tuner.bench.host_noise import HostNoise
from tuner.bench.metrics import (
    FailureSummary,
    delivery_note,
    one_chunk_fraction,
    summarize_failures,
    summarize_notes,
)
from tuner.bench.record import RequestRecord
from tuner.bench.server_metrics import ServerSummary
from tuner.bench.sessions import turn_figures
from tuner.bench.steady import SteadyWindow, no_window_reason, steady_window
from tuner.bench.workload import Workload


@dataclass
class BenchResult:
    """A finished run.

    Attributes:
        url: Server base URL.
        model: Model name sent in requests.
        workload: What was sent.
        metrics: vLLM-compatible metric block (see metrics.compute_metrics).
        server: The server-side summary from /metrics.
        records: Every counted request (warm-ups excluded).
        started_at: UTC time the measured part began (ISO 8601).
        prompt_source: Where prompt tokens came from.
        host_noise: CPU other processes and the hypervisor took during the
            measured part (None where the counters could not be read).
        trace_block_reuse: A trace replay's block-reuse ratio (prompt tokens an
            earlier request had, tuner.bench.trace.block_reuse), to read
            beside ``server.prefix_cache_hit_rate``; None for other datasets.
        turns_cut: A sessions run's turns not sent because the history would
            pass ``max_context`` (tuner.bench.sessions).
    """

    url: str
    model: str
    workload: Workload
    metrics: dict[str, Any]
    server: ServerSummary
    records: list[RequestRecord] = field(repr=False, default_factory=list)
    started_at: str = ""
    prompt_source: str = ""
    host_noise: HostNoise | None = None
    trace_block_reuse: float | None = None
    turns_cut: int = 0

    def __getitem__(self, key: str) -> Any:
        """A metric by its vLLM key name (the JSON form; in-process code reads the properties)."""
        return self.metrics[key]

    @property
    def completed(self) -> int:
        """Counted requests that succeeded."""
        return int(self.metrics.get("completed") or 0)

    @property
    def failed(self) -> int:
        """Counted requests that failed (timeouts, HTTP errors, broken streams)."""
        return int(self.metrics.get("failed") or 0)

    @property
    def total_output_tokens(self) -> int:
        """Output tokens of the successful requests."""
        return int(self.metrics.get("total_output_tokens") or 0)

    @property
    def failures(self) -> FailureSummary:
        """The failed requests by kind, with one example message each."""
        return summarize_failures(self.records)

    @property
    def flags(self) -> FailureSummary:
        """Answers with something left out of their counts (padding chunks, usage), by kind."""
        return summarize_notes(self.records)

    @property
    def steady(self) -> SteadyWindow | None:
        """The closed-loop run's steady window (tuner.bench.steady); None: see steady_note."""
        if self.steady_note is not None or not self.workload.concurrency:
            return None
        return steady_window(self.records, self.workload.concurrency)

    @property
    def steady_note(self) -> str | None:
        """Why this run has no steady window (None when it may have one)."""
        return no_window_reason(self.workload, len(self.records))

    @property
    def one_chunk_fraction(self) -> float:
        """Share of successful responses that arrived in one piece (a starved server)."""
        return one_chunk_fraction(self.records)

    def delivery_warning(self, short: bool = False) -> str | None:
        """What to tell the user when most responses arrived in one piece, else None."""
        return delivery_note(self.one_chunk_fraction, short)

    def host_warning(self) -> str | None:
        """What to tell the user when others competed for the CPU during the run, else None."""
        return self.host_noise.describe() if self.host_noise is not None else None

    def to_dict(self, detailed: bool = False) -> dict[str, Any]:
        """The result JSON: `vllm bench serve` keys, then tunelab's own block.

        This is the boundary form (stored with a trial, printed by ``--json``);
        code in the same process reads the typed properties instead.

        Args:
            detailed: Include per-request lists (like vLLM's --save-detailed).
        """
        wl = self.workload
        failures = self.failures
        flags = self.flags
        head: dict[str, Any] = {
            "date": vllm_date(self.started_at),
            "endpoint_type": "openai" if wl.endpoint == "completions" else "openai-chat",
            "backend": "openai" if wl.endpoint == "completions" else "openai-chat",
            "label": "tunelab",
            "model_id": self.model,
            "tokenizer_id": self.prompt_source,
            "num_prompts": len(self.records),
            "request_rate": "inf" if math.isinf(wl.request_rate) else wl.request_rate,
            "burstiness": wl.burstiness,
            "max_concurrency": wl.concurrency,
        }
        body = (
            self.metrics
            if detailed
            else {
                k: v
                for k, v in self.metrics.items()
                if k
                not in (
                    "input_lens",
                    "output_lens",
                    "ttfts",
                    "itls",
                    "latencies",
                    "start_times",
                    "errors",
                )
            }
        )
        ok = [r for r in self.records if r.success]
        queue = [r.queue_time for r in ok]
        extra = {
            "started_at": self.started_at,
            "url": self.url,
            "workload": wl.to_dict(),
            "warmup_requests": wl.warmup_requests,
            "failures": failures.counts,
            "failure_examples": failures.examples,
            "flagged": flags.counts,
            "flag_examples": flags.examples,
            "server": self.server.to_dict(),
            "mean_queue_time_ms": (sum(queue) / len(queue) * 1000.0) if queue else 0.0,
            "one_chunk_fraction": self.one_chunk_fraction,
            "chunks_per_output_token": (
                sum(len(r.chunk_times) for r in ok) / max(1, self.total_output_tokens)
            ),
        }
        if self.host_noise is not None:
            extra["host_noise"] = self.host_noise.to_dict()
        if self.trace_block_reuse is not None:
            extra["trace_block_reuse"] = self.trace_block_reuse
        steady = self.steady
        extra["steady"] = (
            steady.to_dict() if steady is not None else {"none": self.steady_note or "no length"}
        )
        if turns := turn_figures(self.records):
            extra["sessions"] = {"turns": [t.to_dict() for t in turns], "cut": self.turns_cut}
        return {**head, **body, "tunelab": extra}


def vllm_date(started_at: str) -> str:
    """``date`` as `vllm bench serve` writes it (``%Y%m%d-%H%M%S``), from tunelab's ISO time.

    vLLM's sweep tools and dashboards sort and group on this string; the exact
    instant, with its zone, stays in the ``tunelab`` block as ``started_at``.
    """
    try:
        return datetime.fromisoformat(started_at).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        return started_at
