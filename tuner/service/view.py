"""How a job reads in a list: one line, the same in ``tunelab jobs`` and the TUI's jobs view."""

from __future__ import annotations

import time
from typing import Any

from tuner.service.jobs import JobState


def age(seconds: float) -> str:
    """``42s``, ``17m``, ``2.5h``: short enough for a column."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def active(job: dict[str, Any]) -> bool:
    """Queued or running: the job has not ended (``JobState.ended`` decides)."""
    return not JobState(job["state"]).ended


def state_text(job: dict[str, Any]) -> str:
    """The state, with the exit status when the job ended badly: ``failed (3)``."""
    state = str(job["state"])
    if job.get("returncode") not in (None, 0):
        state = f"{state} ({job['returncode']})"
    return state


def elapsed(job: dict[str, Any], now: float | None = None) -> float:
    """Seconds the job ran (or has run so far; waited so far while queued)."""
    now = time.time() if now is None else now
    started = job.get("started") or job["submitted"]
    return float((job.get("ended") or now) - started)


def job_line(job: dict[str, Any], now: float | None = None) -> str:
    """``3f2a9c01  running        4m  tunelab ab ...`` (and why, when the state does not say)."""
    note = f"  — {job['note']}" if job.get("note") else ""
    return f"{job['id']}  {state_text(job):<13} {age(elapsed(job, now)):>5}  {job['title']}{note}"
