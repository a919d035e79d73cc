"""The vLLM server lifecycle: start, health, backend report, crash detection, teardown."""

from tuner.engine.server import Engine, EngineStartError
from tuner.engine.spec import EngineSpec, resolve_entry

__all__ = ["Engine", "EngineSpec", "EngineStartError", "resolve_entry"]
