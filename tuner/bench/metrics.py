"""From request records to the numbers: latency statistics, throughput, goodput.

The formulas and key names are those of `vllm bench serve` (vllm/benchmarks/
serve.py, ``calculate_metrics`` and the result dict), so a tunelab result JSON
reads like a vLLM one: ``mean_ttft_ms``, ``p99_itl_ms``, ``output_throughput``
... Percentiles use linear interpolation, numpy's default, implemented here
in plain Python so the CLI path needs no numpy import. TPOT of a request is
(latency - TTFT) / (output tokens - 1); ITLs are pooled over all requests.
Token counts come from tuner.bench.sse, which already refused absurd usage
numbers; a duration that is not a positive finite number gives throughputs
of 0, never NaN or infinity (issue 26), so a result always serialises as JSON.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Only annotations: the client (HTTP stack) is not loaded by code that reads results.
    from tuner.bench.record import RequestRecord


PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)
METRICS = ("ttft", "tpot", "itl", "e2el")
# A sessions run's per-turn TTFT bounds: each statistic's worst turn
# (tuner.bench.sessions.worst_turn_metrics).
WORST_TURN_STATS = ("median", "p90", "p99")
WORST_TURN_KEYS = tuple(f"worst_turn_{stat}_ttft_ms" for stat in WORST_TURN_STATS)


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile with linear interpolation (numpy's default method)."""
    if not values:
        return 0.0
    data = sorted(values)
    rank = (len(data) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (rank - lo)


def _p_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def describe_ms(
    name: str, seconds: Sequence[float], pcts: Sequence[float] = PERCENTILES
) -> dict[str, float]:
    """mean/median/std/pXX of ``seconds``, in ms, under vLLM's key names."""
    ms = [s * 1000.0 for s in seconds]
    out = {
        f"mean_{name}_ms": statistics.fmean(ms) if ms else 0.0,
        f"median_{name}_ms": percentile(ms, 50.0),
        f"std_{name}_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0,
    }
    for p in pcts:
        out[f"p{_p_word(p)}_{name}_ms"] = percentile(ms, p)
    return out


def output_len(rec: RequestRecord) -> int:
    """Output tokens of a successful request: the usage report, else its chunks."""
    return rec.output_tokens if rec.output_tokens > 0 else len(rec.chunk_times)


def tpot(rec: RequestRecord) -> float | None:
    """Seconds per output token after the first, or None for 1-token outputs."""
    n = output_len(rec)
    if n <= 1:
        return None
    return (rec.latency - rec.ttft) / (n - 1)


# A decode step takes at least a fraction of a millisecond on any engine: chunks
# closer together than this were read together, not produced that fast.
SAME_READ_GAP_S = 1e-4


def one_chunk_fraction(records: Sequence[RequestRecord]) -> float:
    """Share of multi-token responses whose tokens all reached the client at once.

    A starved API server (or a stalled client) hands over a whole response in
    one piece; its TTFT is then the whole latency and its ITL and TPOT read 0,
    which describes the starvation, not token-by-token streaming. Reported so a
    result that looks impossibly smooth says why.
    """
    multi = [r for r in records if r.success and output_len(r) > 1]
    if not multi:
        return 0.0
    bunched = sum(
        1
        for r in multi
        if len(r.chunk_times) <= 1 or r.chunk_times[-1] - r.chunk_times[0] < SAME_READ_GAP_S
    )
    return bunched / len(multi)


# From this share of one-piece responses on, the chunk metrics describe starvation.
ONE_CHUNK_WARN = 0.5


def is_chunk_metric(metric: str) -> bool:
    """TPOT and ITL metrics (``median_itl_ms``, ``p99_tpot_ms``): gaps between chunks.

    They read 0 when a response arrives in one piece, so they are the figures a
    :func:`delivery_warning` disqualifies (TTFT and E2E still hold).
    """
    parts = metric.split("_")
    return "itl" in parts or "tpot" in parts


def delivery_warning(result: dict[str, Any], short: bool = False) -> str | None:
    """What to tell the user when most responses of a stored result arrived in one piece.

    Args:
        result: A result dict as stored (a trial's results, ``BenchResult.to_dict()``).
        short: One clause for a status line instead of the explanation.
    """
    block = result.get("tunelab")
    share = block.get("one_chunk_fraction") if isinstance(block, dict) else None
    if not isinstance(share, int | float):
        return None
    return delivery_note(share, short)


def delivery_note(share: float, short: bool = False) -> str | None:
    """The warning for ``share`` of responses in one piece; None below ONE_CHUNK_WARN.

    Args:
        share: Fraction of successful responses that arrived in one chunk.
        short: One clause for a status line instead of the explanation.
    """
    if share < ONE_CHUNK_WARN:
        return None
    if short:
        return f"{share:.0%} of responses arrived in one piece: TTFT/ITL show a starved server"
    return (
        f"{share:.0%} of the responses arrived in one piece: the server held its output back "
        "(on a small CPU machine its API server is starved by the engine's busy-polling "
        "processes), so TTFT, TPOT and ITL describe that, not token-by-token streaming; "
        "E2E latency and throughput still hold"
    )


def is_good(rec: RequestRecord, slo: dict[str, float]) -> bool:
    """Whether a successful request meets every objective (ms) in ``slo``.

    ``tpot`` counts as 0 for one-token outputs, as in vLLM; ``itl`` bounds the
    request's worst gap between chunks.
    """
    checks = {
        "ttft": lambda: rec.ttft,
        "tpot": lambda: tpot(rec) or 0.0,
        "e2el": lambda: rec.latency,
        "itl": lambda: max(rec.itls, default=0.0),
    }
    return all(checks[k]() * 1000.0 <= v for k, v in slo.items())


@dataclass(frozen=True)
class FailureSummary:
    """Failed requests grouped by kind, with one example message per kind."""

    counts: dict[str, int]
    examples: dict[str, str]

    def describe(self, limit: int = 3) -> str:
        """``"2 x timeout: ...; 1 x HTTP 500: ..."`` for the first ``limit`` kinds seen.

        "no detail" when nothing failed, so a message built on it always reads.
        """
        shown = list(self.examples.items())[:limit]
        text = "; ".join(f"{self.counts.get(kind, 0)} x {kind}: {ex}" for kind, ex in shown)
        return text or "no detail"


def summarize_failures(records: Sequence[RequestRecord]) -> FailureSummary:
    """Count failures by kind and keep the first message of each."""
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for r in records:
        if not r.success:
            counts[r.error_kind] += 1
            examples.setdefault(r.error_kind, r.error)
    return FailureSummary(dict(counts.most_common()), examples)


def summarize_notes(records: Sequence[RequestRecord]) -> FailureSummary:
    """Flagged answers by kind (chunks not counted, usage not believed), one example each.

    Flags do not fail a request: what they name was left out of the counts.
    Reported so that a server padding its stream, or lying in its usage, is
    visible next to figures that are right despite it.
    """
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for r in records:
        for kind, text in r.notes.items():
            counts[kind] += 1
            examples.setdefault(kind, text)
    return FailureSummary(dict(counts.most_common()), examples)


def _peaks(ok: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's max_output_tokens_per_s and max_concurrent_requests (1 s buckets)."""
    if not ok:
        return 0.0, 0
    t0 = min(r.start for r in ok)
    t1 = max(r.start + r.latency for r in ok)
    n = math.ceil(t1 - t0) + 1
    tokens = [0] * n
    conc = [0] * n
    for r in ok:
        for t in r.chunk_times:
            b = int(t - t0)
            if 0 <= b < n:
                tokens[b] += 1
        for s in range(int(r.start - t0), int(r.start + r.latency - t0) + 1):
            conc[s] += 1
    return float(max(tokens)), max(conc)


def compute_metrics(
    records: Sequence[RequestRecord],
    duration_s: float,
    slo: dict[str, float] | None = None,
    *,
    detailed: bool = False,
) -> dict[str, Any]:
    """The vLLM-compatible metric block of a result.

    Args:
        records: Every counted request (warm-ups excluded), failed ones too.
        duration_s: Wall time from the first send to the last completion.
        slo: Goodput objectives in ms; None or empty leaves goodput None.
        detailed: Also include per-request lists (vLLM's --save-detailed).

    Returns:
        A dict with vLLM's result keys.
    """
    ok = [r for r in records if r.success]
    out_lens = [output_len(r) if r.success else 0 for r in records]
    total_in = sum(r.prompt_len for r in ok if r.prompt_len > 0)
    total_out = sum(out_lens)
    # inf: every throughput reads 0 (no clock, no rate) instead of NaN or infinity.
    dur = duration_s if 0 < duration_s < math.inf else math.inf
    ttfts = [r.ttft for r in ok]
    tpots = [t for r in ok if (t := tpot(r)) is not None]
    itls = [g for r in ok for g in r.itls]
    e2els = [r.latency for r in ok]
    max_tok_s, max_conc = _peaks(ok)
    result: dict[str, Any] = {
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur,
        "request_goodput": (sum(is_good(r, slo) for r in ok) / dur) if slo else None,
        "output_throughput": total_out / dur,
        "total_token_throughput": (total_in + total_out) / dur,
        "max_output_tokens_per_s": max_tok_s,
        "max_concurrent_requests": max_conc,
        "rtfx": 0.0,  # vLLM's inverse real-time factor (audio only); kept for key parity
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        result.update(describe_ms(name, values))
    if detailed:
        result["input_lens"] = [r.prompt_len for r in records]
        result["output_lens"] = out_lens
        result["ttfts"] = [r.ttft for r in records]
        result["itls"] = [r.itls for r in records]
        result["latencies"] = [r.latency for r in records]
        result["start_times"] = [r.start for r in records]
        result["errors"] = [r.error for r in records]
    return result
