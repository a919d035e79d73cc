"""What a trial keeps of its profile, and the tags that ask for one (issue 29).

Kept apart from :mod:`tuner.profiles.capture` (which drives the engine over
HTTP) so that the A/B report, the store's readers and the CLI's ``show`` read
a stored profile without loading the benchmark client's HTTP stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.profiles.trace import TraceProfile

# A trial's tag: "capture" profiles it after its measured run; "armed" launches its
# engine with the profiler armed but takes no trace (the other repeats of a profiled
# A/B, so every launch of an arm has the same command line).
PROFILE_TAG = "profile"
CAPTURE = "capture"
ARMED = "armed"


def wants(tags: dict[str, Any] | None) -> str | None:
    """``capture``, ``armed`` or None: what a trial's tags ask of the profiler."""
    value = (tags or {}).get(PROFILE_TAG)
    return value if value in (CAPTURE, ARMED) else None


@dataclass(frozen=True)
class ProfileRecord:
    """What a trial keeps of its profile (``Trial.profile`` in ``to_dict`` form).

    Attributes:
        trace: The worker trace read (rank 0), for ``tunelab profile`` and Perfetto.
        error: Why there is no profile (the trial itself is unaffected).
        requests: Requests in the profiled window.
        concurrency: Its concurrency (None: unbounded, as the workload).
        started_at: Wall time of ``/start_profile``.
        ended_at: Wall time ``/stop_profile`` returned.
        measured_ended_at: Wall time the trial's measured run ended (the window
            starts after it, and after the guard).
        summary: The trace by kernel family.
    """

    trace: str | None = None
    error: str | None = None
    requests: int | None = None
    concurrency: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    measured_ended_at: float | None = None
    summary: TraceProfile | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: v for k, v in self.__dict__.items() if k != "summary" and v is not None
        }
        if self.summary is not None:
            out["summary"] = self.summary.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ProfileRecord | None:
        if not data:
            return None
        fields = {k: data.get(k) for k in cls.__dataclass_fields__ if k != "summary"}
        raw = data.get("summary")
        return cls(**fields, summary=TraceProfile.from_dict(raw) if raw else None)

    def describe(self) -> str:
        """One line for ``show`` and the Run panel."""
        if self.error or self.summary is None:
            return f"profile: none ({self.error or 'no trace'})"
        s = self.summary
        per_token = f"{s.ms_per_token:.3f} ms per output token" if s.ms_per_token else "no tokens"
        return (
            f"profile: {self.requests} requests after the measured run, {s.steps} engine steps, "
            f"{per_token}; trace {self.trace}"
        )
