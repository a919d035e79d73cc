"""The vLLM server lifecycle: start, health, backend report, crash detection, teardown.

The names below are loaded on first use (PEP 562): the server module pulls in
asyncio, httpx and the process-tree code, and code that only reads what an
engine logged (``tuner.engine.effective``, ``tuner.engine.logscan``) — the
TUI at start-up, the A/B report — must not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.engine.server import Engine, EngineStartError
    from tuner.engine.spec import EngineSpec, resolve_entry

__all__ = ["Engine", "EngineSpec", "EngineStartError", "resolve_entry"]

_HOME = {
    "Engine": "tuner.engine.server",
    "EngineStartError": "tuner.engine.server",
    "EngineSpec": "tuner.engine.spec",
    "resolve_entry": "tuner.engine.spec",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'tuner.engine' has no attribute {name!r}")
