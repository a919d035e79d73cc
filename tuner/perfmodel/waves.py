"""The step arithmetic of a closed-loop run under vLLM's continuous batching.

All requests of a run have the same prompt and output lengths, so requests that start
together finish together: the run proceeds in waves of ``batch`` requests (the last one
smaller). A wave prefills ``b x input_len`` tokens in steps of at most
``max-num-batched-tokens`` (chunked prefill), its first tokens come with the last prefill
step, then ``output_len - 1`` decode steps follow, each producing one token per request.
With a step costing ``a + b_cost x batch + c x prefilled tokens`` seconds, a run's
duration and its mean inter-token latency are linear in ``(a, b_cost, c)``: the rows below
are those coefficients, so the costs can be fitted by least squares.
"""

from __future__ import annotations

import math

from tuner.perfmodel.observation import Point

__all__ = ["duration_row", "itl_row", "waves"]


def waves(point: Point) -> list[int]:
    """The requests of each wave, in order."""
    full, rest = divmod(point.num_prompts, point.batch)
    return [point.batch] * full + ([rest] if rest else [])


def duration_row(point: Point) -> tuple[float, float, float]:
    """Coefficients of (a, b_cost, c) in the run's duration (seconds)."""
    steps = batched = prefilled = 0.0
    decode_steps = max(point.output_len - 1, 0)
    for size in waves(point):
        tokens = size * point.input_len
        steps += math.ceil(tokens / max(point.max_num_batched_tokens, 1)) + decode_steps
        batched += size * decode_steps
        prefilled += tokens
    return steps, batched, prefilled


def itl_row(point: Point) -> tuple[float, float, float]:
    """Coefficients of (a, b_cost, c) in the mean inter-token latency: every gap is a decode
    step of its wave, so the mean weights each wave's batch by its gaps (prefill steps are
    not gaps)."""
    sizes = waves(point)
    return 1.0, sum(b * b for b in sizes) / sum(sizes), 0.0
