"""What the app reaches outside itself for, injectable so tests stay deterministic.

The defaults call ``tuner`` (introspection, telemetry backend selection, the
engine entry). Tests and the screenshot script replace single fields: a fixed
node name, a recorded introspection answer, the fake amdsmi backend, or an
engine double command — each named as what it is at the call site. None of
these is tuning logic; they are the app's boundaries.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tuner.config import EngineConfig
from tuner.introspect import VllmInfo, introspect
from tuner.telemetry import Backend, select_backend


def _introspect() -> VllmInfo:
    return introspect(sys.executable)


def _telemetry() -> Backend:
    return select_backend("auto")


@dataclass
class Services:
    """The app's boundaries.

    Attributes:
        node: The node name shown in the header.
        introspect: Returns the installed vLLM's description (slow the first time: run in a thread).
        telemetry: Returns an opened telemetry backend (may block: run in a thread).
        telemetry_rate_hz: Sampling rate of the GPU panel.
        engine_command: Builds the command line that replaces vLLM's for a config (engine
            doubles in tests only; None in production, which starts real vLLM).
        engine_python: Interpreter that runs vLLM.
        store_path: Trial store location (None: the user's data dir).
        startup_timeout: Seconds an engine may take to become healthy.
    """

    node: str = field(default_factory=platform.node)
    introspect: Callable[[], VllmInfo] = _introspect
    telemetry: Callable[[], Backend] = _telemetry
    telemetry_rate_hz: float = 2.0
    engine_command: Callable[[EngineConfig], list[str]] | None = None
    engine_python: str = sys.executable
    store_path: Path | None = None
    startup_timeout: float = 600.0
