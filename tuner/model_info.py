"""Model analysis, under the name the issue uses; the code lives in :mod:`tuner.model`.

Kept as a thin alias so ``from tuner.model_info import analyze, fit`` and
``from tuner.model import ...`` both work.
"""

from __future__ import annotations

from tuner.model import (
    AttentionKind,
    FitEstimate,
    ModelError,
    ModelInfo,
    MoEInfo,
    analyze,
    fit,
    from_config,
)

__all__ = [
    "AttentionKind",
    "FitEstimate",
    "MoEInfo",
    "ModelError",
    "ModelInfo",
    "analyze",
    "fit",
    "from_config",
]
