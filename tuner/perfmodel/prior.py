"""The study model before its first trials: step costs from the GPU table and the model's bytes.

The fitted model (:mod:`tuner.perfmodel.fit`) needs three measured trials of a context. On a
GPU node the first launches can already be forecast from what is known without running:
a decode step reads the weights once (``a`` = weight bytes on one GPU / memory bandwidth),
each running request reads its KV cache (``b`` = KV bytes per token × its mean context /
bandwidth), and a prefilled token costs two FLOPs per active parameter (``c`` = 2 × active
parameters on one GPU / peak BF16 throughput). The datasheet peaks are never reached, so
both are discounted by a stated efficiency (:data:`BANDWIDTH_EFFICIENCY`,
:data:`COMPUTE_EFFICIENCY`) and the prior's interval is wide (:data:`PRIOR_BAND`). Each
measured trial of the context then scales the prior by what it measured
(:func:`scaled`), until there are enough trials to fit the costs themselves. Where the GPU
is not in the table, its figures are not published, or the model was not analysed, there
is no prior and the forecast says "unknown until run" as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.perfmodel.observation import Observation, Point

__all__ = [
    "BANDWIDTH_EFFICIENCY",
    "COMPUTE_EFFICIENCY",
    "PRIOR_BAND",
    "Prior",
    "PriorCosts",
    "gpu_prior",
    "scaled",
]

BANDWIDTH_EFFICIENCY = 0.7  # share of the datasheet bandwidth a decode step reaches
COMPUTE_EFFICIENCY = 0.5  # share of the datasheet BF16 peak a prefill reaches
PRIOR_BAND = 0.75  # the prior alone: +-75 % (its 80 % interval is a guess until measured)
SCALED_BAND = 0.35  # scaled by one or two measured trials: at least +-35 %


@dataclass(frozen=True)
class PriorCosts:
    """Step costs (seconds) of one point under the prior; the fit's ``a``, ``b``, ``c``."""

    a: float
    b: float
    c: float


@dataclass(frozen=True)
class Prior:
    """The prior of one config on one GPU: costs per point, and where they came from.

    Attributes:
        costs: The step costs at a point (``b`` depends on the point's context length).
        source: ``GPU table: H100 (3.35 TB/s, 989 TFLOP/s) and Llama-3.1-8B's bytes``.
    """

    costs: Callable[[Point], PriorCosts]
    source: str


def gpu_prior(info: Any, gpu_names: Sequence[str], engine: Mapping[str, Any]) -> Prior | None:
    """The prior of a model (a :class:`tuner.model.info.ModelInfo`) on the trial's GPUs with
    its engine arguments (tensor parallelism, KV-cache dtype); None when it cannot be made.
    """
    from tuner.knobs.gpus import from_telemetry_name
    from tuner.model.fit import kv_bytes_per_token_per_gpu, weights_per_gpu

    spec = next((s for n in gpu_names if (s := from_telemetry_name(n)) is not None), None)
    if info is None or spec is None or not spec.hbm_tb_s or not spec.bf16_tflops:
        return None
    tp = _int(engine.get("tensor-parallel-size"), 1)
    pp = _int(engine.get("pipeline-parallel-size"), 1)
    kv_dtype = engine.get("kv-cache-dtype")
    weights = weights_per_gpu(info, tensor_parallel_size=tp, pipeline_parallel_size=pp)
    kv = kv_bytes_per_token_per_gpu(info, kv_dtype if isinstance(kv_dtype, str) else None, tp, pp)
    active = (info.active_param_count or info.param_count) / (tp * pp)
    bandwidth = spec.hbm_tb_s * 1e12 * BANDWIDTH_EFFICIENCY
    compute = spec.bf16_tflops * 1e12 * COMPUTE_EFFICIENCY
    if weights <= 0 or active <= 0:
        return None

    def costs(point: Point) -> PriorCosts:
        context = point.input_len + point.output_len / 2
        return PriorCosts(weights / bandwidth, kv * context / bandwidth, 2 * active / compute)

    source = (
        f"GPU table: {spec.label} ({spec.hbm_tb_s:g} TB/s, {spec.bf16_tflops:,.0f} TFLOP/s "
        f"at {BANDWIDTH_EFFICIENCY:.0%} / {COMPUTE_EFFICIENCY:.0%}) and {info.name}'s bytes"
    )
    return Prior(costs, source)


def scaled(
    prior: Prior, point: Point, measured: Sequence[Observation]
) -> tuple[float, float, float]:
    """The prior's (output tok/s, engine ITL ms, band) at ``point``, scaled by ``measured``
    (trials of the point's context): their geometric mean of measured over prior throughput
    and ITL. Alone, the band is :data:`PRIOR_BAND`; scaled, the spread of the trials' own
    ratios, never under :data:`SCALED_BAND`."""
    from tuner.perfmodel.fit import StepModel

    def at(p: Point) -> tuple[float, float]:
        c = prior.costs(p)
        pred = StepModel(c.a, c.b, c.c, "prior", 0).predict(p)
        return pred.output_throughput, pred.itl_ms

    tput, itl = at(point)
    if not measured:
        return tput, itl, PRIOR_BAND
    tput_logs, itl_logs = [], []
    for obs in measured:
        t, i = at(obs.point)
        tput_logs.append(math.log(obs.output_throughput / t))
        itl_logs.append(math.log(obs.itl_ms / i))
    k_tput = math.exp(sum(tput_logs) / len(tput_logs))
    k_itl = math.exp(sum(itl_logs) / len(itl_logs))
    spread = max(max(tput_logs) - min(tput_logs), max(itl_logs) - min(itl_logs))
    return tput * k_tput, itl * k_itl, max(SCALED_BAND, math.expm1(spread))


def _int(value: Any, default: int) -> int:
    try:
        return max(1, int(value)) if value is not None else default
    except (TypeError, ValueError):
        return default
