"""The bench layer's one error: a run that could not start, with what to fix."""

from __future__ import annotations

from tuner.errors import RunFailedError


class BenchError(RunFailedError, RuntimeError):
    """The run could not start (server unreachable, no model); says what to fix."""
