"""Model analysis: architecture, sizes and a fits-in-VRAM estimate.

``analyze(model)`` reads a model's ``config.json`` (local directory, config
file, Hugging Face cache, or the hub when online) and its safetensors metadata
without loading weights; ``fit(info, ...)`` says whether weights plus the KV
cache a config or workload needs fit the GPUs. The rules use both.
"""

from __future__ import annotations

from tuner.model.fit import (
    DEFAULT_OVERHEAD_BYTES,
    GIB,
    FitEstimate,
    fit,
    kv_bytes_per_token_per_gpu,
)
from tuner.model.info import AttentionKind, ModelError, ModelInfo, from_config
from tuner.model.moe import MoEInfo
from tuner.model.source import analyze, hub_offline

__all__ = [
    "DEFAULT_OVERHEAD_BYTES",
    "GIB",
    "AttentionKind",
    "FitEstimate",
    "MoEInfo",
    "ModelError",
    "ModelInfo",
    "analyze",
    "fit",
    "from_config",
    "hub_offline",
    "kv_bytes_per_token_per_gpu",
]
