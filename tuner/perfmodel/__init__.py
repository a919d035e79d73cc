"""A performance model per study: predicts a config's throughput and inter-token latency before launching it.

On a GPU node a launch costs minutes; a study's own trials already say how this engine, on
this node, with this model, spends its time. The model (issue 31) is a step-time model of
vLLM's continuous batching (:mod:`tuner.perfmodel.waves`): a closed-loop run proceeds in
waves of ``min(concurrency, max-num-seqs)`` requests, each wave prefilling in chunks of
``max-num-batched-tokens`` and then decoding one token per step, each step costing
``a + b x batch`` plus ``c`` per prefilled token. The three costs are fitted to the
study's measured trials (:mod:`tuner.perfmodel.fit`), never assumed, and every prediction
carries an interval from the fit's own leave-one-out errors.

It models the knobs whose effect is batching arithmetic (max-num-seqs,
max-num-batched-tokens, concurrency, prompt and output lengths, request count). Any other
difference from the calibration trials (a backend, an AITER flag, quantization, another
model) is "unknown until run": the model says so instead of guessing a kernel's speed it
never measured (:mod:`tuner.perfmodel.observation`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.perfmodel.fit import Accuracy, Prediction, StepModel, accuracy, calibrate
    from tuner.perfmodel.observation import Observation, Point, observation_of_trial

# Loaded on first use (PEP 562): the fit needs numpy, and a face that only reads stored
# forecasts (tuner.perfmodel.forecast, the report's data) must not load it with the package.
_HOME = {
    "Accuracy": "fit",
    "Prediction": "fit",
    "StepModel": "fit",
    "accuracy": "fit",
    "calibrate": "fit",
    "Observation": "observation",
    "Point": "observation",
    "observation_of_trial": "observation",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'tuner.perfmodel' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tuner.perfmodel.{_HOME[name]}"), name)


__all__ = [
    "Accuracy",
    "Observation",
    "Point",
    "Prediction",
    "StepModel",
    "accuracy",
    "calibrate",
    "observation_of_trial",
]
