"""A service-level objective in vLLM's spelling: ``p99_ttft_ms<=500,p99_itl_ms<=50``.

Capacity (:mod:`tuner.studies.capacity`) asks "how much load does this config
carry while the SLO holds?", so the SLO must be typed, checked against the keys
the benchmark really reports, and written back the way vLLM writes it. The
spelling is that of ``vllm bench sweep serve_sla``'s ``--sla-params``
(vllm/benchmarks/sweep/sla_sweep.py: a result key, one of ``<=``, ``>=``,
``<``, ``>``, a number; e.g. ``{"p99_e2el_ms": "<=500"}``), written here as a
comma-separated list; the JSON record form is accepted too. Each bound is a
:class:`tuner.studies.space.Constraint`, the type ``tune`` and ``winner``
already judge trials with, so an SLO means the same thing in every study.

A run meets the SLO when every bound holds on its results (vLLM judges the mean
over its runs at one load; :func:`SLO.met_by_mean` does that over repeated
probes). The per-request goodput objectives of ``vllm bench serve --goodput``
(``ttft:500``) are a different thing (a share of requests, not a percentile);
:meth:`SLO.goodput` derives them so a capacity run also reports goodput.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.bench.metrics import METRICS, PERCENTILES, WORST_TURN_KEYS
from tuner.bounded import loads as json_loads
from tuner.errors import TunelabError
from tuner.studies.space import Constraint, SpaceError, parse_constraint
from tuner.trials.model import OBJECTIVE_KEYS

_LATENCY_RE = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_([a-z0-9]+)_ms$")
_EXAMPLE = "p99_ttft_ms<=500,p99_itl_ms<=50"
# Result keys a bound may name besides the objectives and the latency statistics:
# the benchmark's counters (tuner.bench.metrics.compute_metrics) and the telemetry
# window's figures (tuner.telemetry.sampler, tuner.trials.session), which
# tuner.trials.model.metric reads a trial's value from.
COUNTER_KEYS = (
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrent_requests",
)
TELEMETRY_KEYS = (
    "energy_j",
    "mean_power_w",
    "peak_vram_bytes",
    "mean_gfx_activity",
    "peak_gfx_activity",
)


class SLOError(TunelabError, ValueError):
    """An SLO tunelab cannot judge; the fix says how to write it."""


def _percentile_words() -> list[str]:
    return [str(int(p)) if int(p) == p else str(p) for p in PERCENTILES]


def check_key(key: str) -> None:
    """Refuse a result key the benchmark does not report (a typo would never be met or missed).

    Raises:
        SLOError: With the keys that exist.
    """
    if key in OBJECTIVE_KEYS or key in COUNTER_KEYS or key in TELEMETRY_KEYS:
        return
    if key in WORST_TURN_KEYS:  # a sessions run's (check_for_workload refuses it elsewhere)
        return
    match = _LATENCY_RE.match(key)
    if match is None:
        known = ", ".join((*OBJECTIVE_KEYS, *COUNTER_KEYS, *TELEMETRY_KEYS, *WORST_TURN_KEYS))
        raise SLOError(
            f"SLO key {key!r} is not a result key",
            fix=f"use a latency statistic such as p99_ttft_ms, mean_itl_ms, median_e2el_ms "
            f"(metrics {', '.join(METRICS)}) or one of {known}",
        )
    pct, metric = match.group(2), match.group(3)
    if metric not in METRICS:
        raise SLOError(
            f"SLO key {key!r}: {metric!r} is not measured", fix=f"use one of {', '.join(METRICS)}"
        )
    if pct is not None and pct not in _percentile_words():
        raise SLOError(
            f"SLO key {key!r}: the benchmark reports the percentiles "
            f"{', '.join('p' + w for w in _percentile_words())}",
            fix=f"use one of those, e.g. p99_{metric}_ms",
        )


def check_for_workload(keys: Sequence[str], workload: Any) -> None:
    """Refuse a bound the workload's runs cannot report: a per-turn TTFT bound
    (``worst_turn_p99_ttft_ms``) outside a sessions workload would never be met.

    Raises:
        SLOError: Naming the key and the workload that reports it.
    """
    turn_keys = [k for k in keys if k in WORST_TURN_KEYS]
    if turn_keys and str(getattr(workload, "dataset_kind", "")) != "sessions":
        raise SLOError(
            f"SLO key {turn_keys[0]} is a multi-turn run's per-turn TTFT: this workload has "
            "no turns, so it would never be met",
            fix="measure conversations (--dataset-kind sessions --turns N, or a preset whose "
            "[workload] has them), or bound p99_ttft_ms instead",
        )


@dataclass(frozen=True)
class SLO:
    """Bounds on result keys that a run must all meet.

    Attributes:
        constraints: The bounds, in the order given (one per key).
    """

    constraints: tuple[Constraint, ...]

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.constraints)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.metric for c in self.constraints)

    def margin(self, results: Mapping[str, Any] | None) -> float:
        """The worst relative violation (<= 0: met), as vLLM's ``max(sla_margins)``.

        Relative to each bound, so ``p99_ttft_ms`` in ms and a throughput in
        tokens/s can be compared; a missing key is a violation (1e30).
        """
        worst = -math.inf
        for c in self.constraints:
            value = (results or {}).get(c.metric)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return 1e30
            scale = abs(c.bound) or 1.0
            worst = max(worst, c.violation(float(value)) / scale)
        return worst

    def met(self, results: Mapping[str, Any] | None) -> bool:
        """Every bound holds on one run's results."""
        return self.margin(results) <= 0

    def met_by_mean(self, runs: Sequence[Mapping[str, Any]]) -> bool:
        """Every bound holds on the mean of each key over ``runs`` (vLLM's rule for num_runs > 1)."""
        if not runs:
            return False
        means: dict[str, float] = {}
        for key in self.keys:
            values = [v for r in runs if isinstance(v := r.get(key), int | float)]
            if len(values) < len(runs):
                return False
            means[key] = statistics.fmean(values)
        return self.met(means)

    def goodput(self) -> dict[str, float]:
        """Per-request goodput objectives (``Workload.slo``) implied by the upper latency bounds.

        ``p99_ttft_ms<=500`` gives ``ttft: 500``: a request is good when its own
        TTFT is within 500 ms, so ``request_goodput`` counts the requests that
        met the bound the percentile speaks of. Only ``*_ms`` upper bounds qualify.
        """
        out: dict[str, float] = {}
        for c in self.constraints:
            match = _LATENCY_RE.match(c.metric)
            if match and c.op in ("<=", "<") and not c.metric.startswith("std_"):
                metric = match.group(3)
                out[metric] = min(out.get(metric, math.inf), c.bound)
        return out

    def to_record(self) -> dict[str, str]:
        """vLLM's ``--sla-params`` record: ``{"p99_ttft_ms": "<=500"}``."""
        return {c.metric: f"{c.op}{c.bound:g}" for c in self.constraints}


def parse_slo(text: str) -> SLO:
    """``p99_ttft_ms<=500,p99_itl_ms<=50`` (or vLLM's JSON record) as an :class:`SLO`.

    Raises:
        SLOError: Empty text, a bound that is not KEY OP NUMBER, an unknown key,
            a key given twice, a goodput-style ``ttft:500``, or a non-finite bound.
    """
    raw = text.strip()
    if not raw:
        raise SLOError("the SLO is empty", fix=f"write bounds such as {_EXAMPLE}")
    if raw.startswith("{"):
        return _from_record(raw)
    constraints: list[Constraint] = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        if ":" in part and not any(op in part for op in "<>"):
            raise SLOError(
                f"SLO {part!r} is goodput syntax (a bound per request)",
                fix=f"for a capacity SLO bound a statistic, e.g. p99_{part.split(':')[0]}_ms<="
                f"{part.split(':', 1)[1] or '500'}",
            )
        try:
            constraint = parse_constraint(part)
        except SpaceError as exc:
            raise SLOError(str(exc), fix=f"write bounds such as {_EXAMPLE}") from None
        _check(constraint, constraints)
        constraints.append(constraint)
    if not constraints:
        raise SLOError("the SLO is empty", fix=f"write bounds such as {_EXAMPLE}")
    return SLO(tuple(constraints))


def _from_record(raw: str) -> SLO:
    """vLLM's ``{"p99_e2el_ms": "<=500"}`` form."""
    try:
        record = json_loads(raw, what="SLO")
    except ValueError as exc:
        raise SLOError(
            f"the SLO looks like JSON but is not: {getattr(exc, 'msg', exc)}",
            fix='write {"p99_ttft_ms": "<=500"} or p99_ttft_ms<=500',
        ) from None
    if not isinstance(record, dict) or not record:
        raise SLOError(
            "a JSON SLO is one object of KEY: 'OP VALUE'", fix='{"p99_ttft_ms": "<=500"}'
        )
    return parse_slo(",".join(f"{k}{v}" for k, v in record.items()))


def check_constraint(constraint: Constraint) -> Constraint:
    """A bound a study may judge trials by (``tune``/``sweep``/``ab``/``winner --slo``).

    The same checks as a capacity SLO's: a result key the benchmark reports
    (``bogus>=5`` would silently never hold, or always), a finite bound, and a
    latency bound above 0 ms.

    Raises:
        SLOError: naming the known metrics.
    """
    _check(constraint, ())
    return constraint


def _check(constraint: Constraint, earlier: Sequence[Constraint]) -> None:
    check_key(constraint.metric)
    if not math.isfinite(constraint.bound):
        raise SLOError(
            f"SLO {constraint}: the bound must be a finite number", fix="e.g. p99_ttft_ms<=500"
        )
    if constraint.metric.endswith("_ms") and constraint.bound <= 0:
        raise SLOError(
            f"SLO {constraint}: a latency bound must be > 0 ms", fix="e.g. p99_ttft_ms<=500"
        )
    if any(c.metric == constraint.metric for c in earlier):
        raise SLOError(f"SLO key {constraint.metric} is given twice", fix="keep one bound per key")
