"""The knob catalogue: every tunable tunelab knows, as one ordered table.

The entries live in :mod:`tuner.knobs.env_knobs` (environment variables) and
:mod:`tuner.knobs.engine_knobs` (``vllm serve`` flags); this module joins them
and fixes the group order the TUI shows. Read it through :mod:`tuner.knobs`.
"""

from __future__ import annotations

from tuner.knobs.engine_knobs import ENGINE_KNOBS
from tuner.knobs.env_knobs import ENV_KNOBS
from tuner.knobs.types import Knob

# The TUI's panels, in order: the knobs that matter most first.
GROUP_ORDER: tuple[str, ...] = (
    "aiter",
    "attention",
    "batching",
    "cudagraph",
    "quantization",
    "memory",
    "parallelism",
    "speculative",
    "rocm",
    "environment",
)

GROUP_TITLES: dict[str, str] = {
    "aiter": "AITER kernels (ROCm)",
    "attention": "Attention",
    "batching": "Batching & scheduling",
    "cudagraph": "CUDA/HIP graphs",
    "quantization": "Quantization & dtypes",
    "memory": "Memory",
    "parallelism": "Parallelism",
    "speculative": "Speculative decoding",
    "rocm": "Other ROCm kernels",
    "environment": "HIP, BLAS, RCCL, loading",
}

KNOBS: tuple[Knob, ...] = ENV_KNOBS + ENGINE_KNOBS
