"""Why B is faster: an A/B's measured difference attributed to kernel families (issue 29).

A profiled A/B (``run_ab(profile=True)``) keeps one profile per arm, taken on
the arm's first launch after its measured run (tuner.profiles.capture). This
module sets the two side by side (tuner.profiles.explain): each family's
milliseconds per output token in A and in B, and the share of the *measured*
per-token difference (``1000 / output_throughput`` of the profiled launches'
own measured runs: the same launches, so launch-to-launch noise — 2x on a busy
CPU box — does not enter the share) that the families account for. What the
traces cannot see (the API server, detokenisation, the client) stays
"unexplained".
Pure: a stored A/B gives the same explanation as its run did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.profiles.explain import Explanation, explain
from tuner.profiles.record import ProfileRecord
from tuner.studies.common import value_of
from tuner.trials.model import Trial


@dataclass(frozen=True)
class ArmsExplanation:
    """The arms' profiles and their explanation, or why there is none.

    Attributes:
        a_trial, b_trial: The profiled trial of each arm.
        a, b: Their profile records.
        explanation: The difference by family (None when an arm lacks a profile).
        missing: Why there is no explanation (an arm's profile failed or was never taken).
    """

    a_trial: str | None
    b_trial: str | None
    a: ProfileRecord | None
    b: ProfileRecord | None
    explanation: Explanation | None
    missing: str | None = None

    def summary(self) -> str:
        """The sentence every face shows."""
        if self.explanation is None:
            return f"profile: no explanation ({self.missing})"
        return self.explanation.summary()

    def to_dict(self) -> dict[str, Any]:
        return {
            "a_trial": self.a_trial,
            "b_trial": self.b_trial,
            "a": self.a.to_dict() if self.a else None,
            "b": self.b.to_dict() if self.b else None,
            "explanation": self.explanation.to_dict() if self.explanation else None,
            "missing": self.missing,
            "summary": self.summary(),
        }


def measured_ms_per_token(trial: Trial) -> float | None:
    """Milliseconds per output token of a trial's measured run (None: not measured)."""
    value = value_of(trial, "output_throughput")
    return 1e3 / value if value and value > 0 else None


def _profiled(trials: list[Trial]) -> tuple[Trial | None, ProfileRecord | None]:
    """The arm's first trial with a usable profile, else its first that asked for one."""
    asked = [(t, r) for t in trials if (r := ProfileRecord.from_dict(t.profile)) is not None]
    usable = [(t, r) for t, r in asked if r.summary is not None and r.summary.tokens]
    found = usable or asked
    return found[0] if found else (None, None)


def arms_explanation(arms: dict[str, list[Trial]]) -> ArmsExplanation | None:
    """The A/B's explanation by family; None when no trial of it was profiled."""
    (ta, ra), (tb, rb) = _profiled(arms.get("A", [])), _profiled(arms.get("B", []))
    if ra is None and rb is None:
        return None
    ids = (ta.id if ta else None, tb.id if tb else None)
    for arm, record in (("A", ra), ("B", rb)):
        if record is None or record.summary is None or not record.summary.tokens:
            why = record.error if record and record.error else "no trace with output tokens"
            return ArmsExplanation(*ids, ra, rb, None, f"arm {arm}'s profile: {why}")
    assert ta and tb and ra and rb and ra.summary and rb.summary
    a_ms, b_ms = measured_ms_per_token(ta), measured_ms_per_token(tb)
    measured = (a_ms, b_ms) if a_ms is not None and b_ms is not None else None
    return ArmsExplanation(*ids, ra, rb, explain(ra.summary, rb.summary, measured))
