"""The model's stated intervals: a value and a relative half-width, for fits and forecasts alike.

Kept apart from :mod:`tuner.perfmodel.fit` (numpy) so that a face that only reads stored
forecasts (:mod:`tuner.perfmodel.forecast`) loads no numerics.
"""

from __future__ import annotations

__all__ = ["interval"]


def interval(value: float, half_width: float) -> tuple[float, float]:
    """``value`` ± a relative half-width: every stated 80 % interval of the model."""
    return value * (1 - half_width), value * (1 + half_width)
