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

from tuner.perfmodel.fit import Accuracy, Prediction, StepModel, accuracy, calibrate
from tuner.perfmodel.observation import Observation, Point, observation_of_trial

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
