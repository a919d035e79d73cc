"""What the performance model reads from a trial: the batching point, the rest, the figures.

A :class:`Point` holds the knobs the model understands; ``context`` holds everything else
about the trial (model, env, other engine args, the workload's other fields), which must be
equal for two trials to share one model. A trial whose workload the wave arithmetic does
not describe (a request rate, a dataset, sessions, varied lengths) gives no observation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.bench.workload import DatasetKind, Workload

__all__ = [
    "MODELLED_ENGINE_KEYS",
    "Observation",
    "Point",
    "context_text",
    "observation_of_trial",
    "point_of",
    "trial_parts",
]

MODELLED_ENGINE_KEYS = frozenset({"max-num-seqs", "max-num-batched-tokens"})
_MODELLED_WORKLOAD = frozenset(
    {"input_len", "output_len", "num_prompts", "concurrency", "seed", "warmup_requests", "slo"}
)


@dataclass(frozen=True)
class Point:
    """The knobs the model predicts over.

    Attributes:
        max_num_seqs: Requests the engine batches at most.
        max_num_batched_tokens: Tokens one engine step takes at most.
        concurrency: Requests the client keeps in flight (None: all at once).
        input_len: Prompt tokens per request.
        output_len: Generated tokens per request.
        num_prompts: Measured requests.
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    concurrency: int | None
    input_len: int
    output_len: int
    num_prompts: int

    @property
    def batch(self) -> int:
        """Requests running together: the least of the client's, the engine's and the run's."""
        client = self.concurrency or self.num_prompts
        return max(1, min(client, self.max_num_seqs, self.num_prompts))

    def label(self) -> str:
        conc = "all" if self.concurrency is None else str(self.concurrency)
        return (
            f"seqs {self.max_num_seqs} · mbt {self.max_num_batched_tokens} · conc {conc} · "
            f"{self.input_len}/{self.output_len} × {self.num_prompts}"
        )


@dataclass(frozen=True)
class Observation:
    """One measured trial as the model sees it.

    Attributes:
        point: Its batching point.
        context: Everything else about it (JSON text): trials share a model only when equal.
        output_throughput: Output tokens per second over the run.
        itl_ms: The engine's mean inter-token latency over the run (its own histogram,
            tuner.bench.server_metrics): the client's gaps are not used, a stream that
            delivers several tokens in one chunk hides the step.
        source: The trial's id (or a benchmark's label).
    """

    point: Point
    context: str
    output_throughput: float
    itl_ms: float
    source: str = ""


def point_of(
    engine: Mapping[str, Any], workload: Workload, defaults: tuple[int, int]
) -> tuple[Point, str] | None:
    """The point and context of a config and workload; None when the wave arithmetic does not
    describe the workload (a rate, a dataset file or kind, sessions, varied lengths).

    Args:
        engine: The engine arguments.
        workload: The workload.
        defaults: (max-num-batched-tokens, max-num-seqs) vLLM uses when unset.
    """
    closed = math.isinf(workload.request_rate) and workload.duration_s is None
    random = workload.source_kind is DatasetKind.RANDOM  # no file, no prefix, no sessions
    if not closed or not random or workload.range_ratio or workload.turns > 1:
        return None
    mbt = _int(engine.get("max-num-batched-tokens"), defaults[0])
    seqs = _int(engine.get("max-num-seqs"), defaults[1])
    point = Point(seqs, mbt, workload.concurrency, workload.input_len, workload.output_len,
                  workload.num_prompts)  # fmt: skip
    rest_engine = {k: v for k, v in engine.items() if k not in MODELLED_ENGINE_KEYS}
    rest_workload = {k: v for k, v in workload.to_dict().items() if k not in _MODELLED_WORKLOAD}
    return point, json.dumps([rest_engine, rest_workload], sort_keys=True, default=str)


def trial_parts(trial: Any) -> tuple[Point, dict[str, Any]] | None:
    """A trial's point and the parts of its context, measured or not; None when the wave
    arithmetic does not describe its workload.

    The parts are what must be equal for two trials to share step costs: the model, the
    env, the platform, the vLLM release, the other engine arguments and the workload's
    other fields (:func:`context_text` joins them; :mod:`tuner.perfmodel.forecast` names
    the ones that differ).
    """
    from tuner.knobs.defaults import batch_defaults

    version = trial.vllm_version or "0.32.0"
    # What vLLM ran wins over what was asked (its start-up log, tuner.engine.effective);
    # an unset knob vLLM did not log is the release's default for the platform.
    ran = (trial.effective or {}).get("values") or {}
    engine = dict(trial.config.engine)
    for key in MODELLED_ENGINE_KEYS:
        logged = ran.get(key)
        if isinstance(logged, dict) and logged.get("value") is not None:
            engine[key] = logged["value"]
    gib, name = _device(trial.gpu_names)
    base = batch_defaults(version, trial.platform or "cpu", gib, device_name=name)
    found = point_of(engine, trial.workload, (base.max_num_batched_tokens, base.max_num_seqs))
    if found is None:
        return None
    point = found[0]
    parts = {
        "model": trial.config.model,
        "env": dict(trial.config.env),
        "platform": trial.platform,
        "vllm": version,
        "engine": {k: v for k, v in engine.items() if k not in MODELLED_ENGINE_KEYS},
        "workload": {
            k: v for k, v in trial.workload.to_dict().items() if k not in _MODELLED_WORKLOAD
        },
    }
    return point, parts


def context_text(parts: Mapping[str, Any]) -> str:
    """The context as one comparable text."""
    return json.dumps(parts, sort_keys=True, default=str)


def observation_of_trial(trial: Any) -> Observation | None:
    """A finished trial's observation, or None (not done, no figures, not a wave workload).

    The context adds the model, the env, the platform and the vLLM version: a prediction is
    made only within one of those.
    """
    results = trial.results or {}
    tput, itl_ms = results.get("output_throughput"), (trial.server or {}).get("mean_itl_ms")
    if str(getattr(trial.status, "value", trial.status)) != "done" or not tput or not itl_ms:
        return None
    found = trial_parts(trial)
    if found is None:
        return None
    point, parts = found
    return Observation(point, context_text(parts), float(tput), float(itl_ms), trial.id)


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _device(names: list[str]) -> tuple[float | None, str | None]:
    """The first GPU's memory (the GPU table) and name, which pick vLLM's batch defaults."""
    from tuner.knobs.gpus import from_telemetry_name

    for name in names:
        spec = from_telemetry_name(name)
        return (spec.hbm_gib if spec else None), name
    return None, None
