"""The spread of one metric over repeated launches, under AIPerf's names.

A preset's ``[results.noise]``, the capacity answer over launches and
``presets verify``'s reference all describe the same thing: n launches of one
config, their mean, and how far that mean can be trusted. This module is the
one place that computes it, so the names (``std``, ``cv``, ``se``, ``ci_low``,
``ci_high``, ``confidence_level``: AIPerf's, so other tools read the files) and
the interval (Student t over launches, the unit of evidence) cannot drift
apart between the faces that write them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.trials.tdist import t_quantile


@dataclass(frozen=True)
class RepeatNoise:
    """n launches of one config, summarised.

    Attributes:
        n: Launches with a value.
        mean: Their mean.
        std: Sample standard deviation (n - 1).
        confidence_level: Two-sided level of ``ci_low``..``ci_high``.
        minimum, maximum: The extreme launches (None when built from a summary).
    """

    n: int
    mean: float
    std: float
    confidence_level: float = 0.95
    minimum: float | None = None
    maximum: float | None = None

    @classmethod
    def of(cls, values: Sequence[float], confidence_level: float = 0.95) -> RepeatNoise | None:
        """The noise of ``values`` (one per launch), or None with fewer than two."""
        numbers = [float(v) for v in values if v is not None and math.isfinite(float(v))]
        if len(numbers) < 2:
            return None
        return cls(
            len(numbers),
            statistics.fmean(numbers),
            statistics.stdev(numbers),
            confidence_level,
            min(numbers),
            max(numbers),
        )

    @property
    def se(self) -> float:
        """Standard error of the mean over launches."""
        return self.std / math.sqrt(self.n)

    @property
    def cv(self) -> float | None:
        """Launch-to-launch noise as a fraction of the mean (None for a zero mean)."""
        return self.std / abs(self.mean) if self.mean else None

    @property
    def half_width(self) -> float:
        """Half the Student t interval of the mean."""
        return t_quantile(0.5 + self.confidence_level / 2.0, self.n - 1) * self.se

    @property
    def ci_low(self) -> float:
        return self.mean - self.half_width

    @property
    def ci_high(self) -> float:
        return self.mean + self.half_width

    def table(self, objective: str, trial_ids: Sequence[str] = ()) -> dict[str, Any]:
        """The ``[results.noise]`` table: AIPerf's names plus tunelab's ``objective`` and ids.

        ``repeats`` stays beside AIPerf's ``count`` because presets written
        before these names read it (``presets verify`` accepts both).
        """
        out: dict[str, Any] = {
            "objective": objective,
            "repeats": self.n,
            "count": self.n,
            "mean": self.mean,
            "std": self.std,
            "cv": self.cv,
            "se": self.se,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence_level": self.confidence_level,
            "min": self.minimum,
            "max": self.maximum,
        }
        if trial_ids:
            out["trial_ids"] = list(trial_ids)
        return {k: v for k, v in out.items() if v is not None}
