"""Is the measured window long enough to trust? A warning and a workload size when it is not.

The default workload measures 32 requests; on the CPU engine that is a 0.9–1.9 s
window, and run-to-run spread was a CV of 31 % (issue 32): a scheduler hiccup of
a few hundred milliseconds, a page-cache miss, a compile on the first long
prompt, each is a large share of a sub-second window. Noise of that kind is a
fixed cost per run, so its share falls with the window's length: a run needs
enough requests to last :data:`TARGET_WINDOW_S`. This module owns that judgement
for every face: one run's window (:func:`window_note`), and the repeats of an
A/B arm, whose observed spread sets how much longer the window should be
(:func:`repeats_note`). The suggested size is a ``--num-prompts`` (the
workload panel's ``n``), never above what a workload may hold.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.bench.workload import MAX_NUM_PROMPTS

# Below this a run is one hiccup away from another figure (the default workload's
# 0.9-1.9 s windows measured a 31 % CV); at the target a 0.3 s stall moves tok/s ~3 %.
SHORT_WINDOW_S = 5.0
TARGET_WINDOW_S = 10.0
# Run-to-run spread an A/B can live with: a 5 % effect is then a few repeats away.
TARGET_CV = 0.05


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class WindowNote:
    """A measured window too short for its figures, and the workload size that fixes it.

    Attributes:
        seconds: The measured window (first send to last completion; the median over
            repeats for an arm).
        requests: Requests completed in it.
        suggested_prompts: ``--num-prompts`` for a window that long noise cannot move much.
        cv: Run-to-run coefficient of variation of the throughput (None: one run).
    """

    seconds: float
    requests: int
    suggested_prompts: int
    cv: float | None = None

    def describe(self) -> str:
        """The sentence every face shows, with the size to use."""
        spread = f"; the repeats spread {self.cv:.0%} (CV)" if self.cv is not None else ""
        return (
            f"short measured window: {self.requests} requests in {self.seconds:.1f} s{spread}; "
            "a stall of a few hundred ms is a large share of it. Measure "
            f"{self.suggested_prompts} requests (--num-prompts {self.suggested_prompts}, "
            f"workload n={self.suggested_prompts}) for a window of ~{self._target_s():.0f} s"
        )

    def short(self) -> str:
        """``⚠ 0.9 s window: n=360 for ~10 s``: for a line that has little room."""
        return (
            f"⚠ {self.seconds:.1f} s window: n={self.suggested_prompts} for "
            f"~{self._target_s():.0f} s"
        )

    def _target_s(self) -> float:
        per_request = self.seconds / max(self.requests, 1)
        return per_request * self.suggested_prompts

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "requests": self.requests,
            "suggested_prompts": self.suggested_prompts,
            "cv": self.cv,
        }


def suggested_prompts(requests: int, seconds: float, target_s: float = TARGET_WINDOW_S) -> int:
    """Requests for a ``target_s`` window at the measured pace, at most a workload's bound."""
    per_request = seconds / max(requests, 1)
    wanted = math.ceil(target_s / per_request) if per_request > 0 else requests
    return max(requests, min(MAX_NUM_PROMPTS, wanted))


def _window(results: Mapping[str, Any]) -> tuple[float, int] | None:
    seconds = _number(results.get("duration"))
    completed = _number(results.get("completed"))
    if seconds is None or seconds <= 0 or completed is None or completed < 1:
        return None
    return seconds, int(completed)


def window_note(results: Mapping[str, Any] | None) -> WindowNote | None:
    """One run's warning (None: the window is long enough, or nothing was measured)."""
    window = _window(results or {})
    if window is None:
        return None
    seconds, requests = window
    if seconds >= SHORT_WINDOW_S:
        return None
    return WindowNote(seconds, requests, suggested_prompts(requests, seconds))


def repeats_note(runs: Sequence[Mapping[str, Any] | None]) -> WindowNote | None:
    """The repeats of one config: a warning when their windows were short *and* they spread.

    Noise that is a fixed cost per run shrinks as 1/window, so the window is
    scaled by ``cv / TARGET_CV`` (at least to :data:`TARGET_WINDOW_S`). Repeats
    that agree need no longer window, however short: the figure is already stable.
    """
    windows = [w for r in runs if (w := _window(r or {})) is not None]
    throughputs = [
        v for r in runs if (v := _number((r or {}).get("output_throughput"))) is not None
    ]
    if len(windows) < 2 or len(throughputs) < 2:
        return None
    mean = statistics.fmean(throughputs)
    cv = statistics.stdev(throughputs) / mean if mean > 0 else None
    seconds = statistics.median(s for s, _ in windows)
    requests = round(statistics.median(n for _, n in windows))
    if cv is None or cv <= TARGET_CV or seconds >= SHORT_WINDOW_S:
        return None
    target = max(TARGET_WINDOW_S, seconds * cv / TARGET_CV)
    return WindowNote(seconds, requests, suggested_prompts(requests, seconds, target), cv)


__all__ = [
    "SHORT_WINDOW_S",
    "TARGET_CV",
    "TARGET_WINDOW_S",
    "WindowNote",
    "repeats_note",
    "suggested_prompts",
    "window_note",
]
