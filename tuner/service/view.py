"""How a job reads in a list: one line, the same in ``tunelab jobs`` and the TUI's jobs view.

Titles and notes come from the job table, which came from a client: they go
through :func:`~tuner.service.jobs.one_line` here as well as in the service,
so no escape sequence in them ever reaches a terminal.
"""

from __future__ import annotations

import time
from typing import Any

from tuner.service.jobs import JobState, one_line


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
    note = f"  — {one_line(job['note'], 1000)}" if job.get("note") else ""
    head = f"{one_line(job['id'], 32)}  {one_line(state_text(job), 40):<13}"
    return f"{head} {age(elapsed(job, now)):>5}  {one_line(job['title'])}{note}"
