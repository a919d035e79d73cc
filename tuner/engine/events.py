"""What an engine tells its watchers, as small immutable messages.

The CLI prints them, the TUI renders them, the trial runner records them;
none of them polls files. Events are delivered on the event loop's thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineStarting:
    """The server process was launched."""

    pid: int
    port: int
    argv: tuple[str, ...]
    attempt: int = 1


@dataclass(frozen=True)
class EngineLog:
    """One line of the server's combined stdout/stderr."""

    line: str


@dataclass(frozen=True)
class EngineBackendChosen:
    """The attention backend vLLM reported (or that its platform implies)."""

    backend: str
    inferred: bool = False


@dataclass(frozen=True)
class EngineReady:
    """/health answered 200."""

    url: str
    startup_seconds: float


@dataclass(frozen=True)
class EngineFailed:
    """Start-up failed: the process exited, or the timeout fired."""

    reason: str
    log_tail: tuple[str, ...]


@dataclass(frozen=True)
class EngineExited:
    """The process ended after it was ready, without being asked to."""

    returncode: int | None
    reason: str


@dataclass(frozen=True)
class EngineStopped:
    """tunelab stopped the engine; the whole process tree is gone."""

    returncode: int | None
    seconds: float


EngineEvent = (
    EngineStarting
    | EngineLog
    | EngineBackendChosen
    | EngineReady
    | EngineFailed
    | EngineExited
    | EngineStopped
)
EventCallback = Callable[[EngineEvent], None]
