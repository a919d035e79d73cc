"""The fit summary the Model panel shows: the memory rule's own estimate, nothing else.

``tui`` used to call ``tuner.model.fit`` itself and left out pipeline
parallelism, online FP8 and the workload, which the memory rule includes; now
both read :func:`tuner.rules.memory.estimate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.model import ModelInfo
from tuner.rules import Target, WorkloadShape
from tuner.rules.base import Context
from tuner.rules.memory import estimate


class FitState(StrEnum):
    """What the panel can say about the fit."""

    FITS = "fits"
    DOES_NOT_FIT = "does not fit"  # the memory rule's error: vLLM will not start
    QUEUES = "fits; KV queues"  # its warning/advice: fewer sequences at once than asked
    CPU = "CPU engine"
    UNKNOWN = "fit: VRAM unknown"


@dataclass(frozen=True)
class FitSummary:
    """The fit verdict and the figures beside it.

    Attributes:
        state: fits / does not fit / CPU engine / VRAM unknown.
        gpus: GPUs of the target.
        vram_gib: One GPU's memory, where known.
        kv_bytes_per_token: KV-cache bytes one token takes (whole model, the config's dtype).
    """

    state: FitState
    gpus: int
    vram_gib: float | None
    kv_bytes_per_token: int


def fit_summary(
    info: ModelInfo, config: EngineConfig, target: Target, workload: Workload | None
) -> FitSummary:
    """The Model panel's fit verdict for ``config`` on ``target`` under ``workload``."""
    kv = info.kv_bytes_per_token(str(config.get("kv-cache-dtype") or "auto"))
    shape = WorkloadShape.from_workload(workload) if workload is not None else None
    if target.platform == "cpu":
        state = FitState.CPU
    else:
        est = estimate(Context(config, info, target, shape))
        if est is None:
            state = FitState.UNKNOWN
        else:
            state = (
                FitState.DOES_NOT_FIT
                if not (est.weights_fit and est.holds_one_sequence)
                else FitState.FITS
                if est.fits
                else FitState.QUEUES
            )
    return FitSummary(state, target.gpus, target.vram_gib, kv)
