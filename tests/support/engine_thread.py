"""Runs a real Engine on a private event loop in a background thread.

Session-scoped fixtures outlive any one test's event loop; keeping the
engine on its own loop lets sync and async tests share one running server.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field

from tuner.engine import Engine, EngineSpec
from tuner.engine.events import EngineEvent


@dataclass
class RunningEngine:
    """What tests need of a shared engine."""

    url: str
    served_model: str
    backend: str | None
    startup_seconds: float
    log_path: str
    pids: set[int]
    events: list[EngineEvent] = field(default_factory=list)


class EngineThread:
    """Starts an Engine in a thread-owned loop; ``stop()`` tears it down."""

    def __init__(self, spec: EngineSpec) -> None:
        self.spec = spec
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, daemon=True, name="engine-loop"
        )
        self.engine: Engine | None = None
        self.events: list[EngineEvent] = []

    def start(self) -> RunningEngine:
        self.thread.start()
        self.engine = Engine(self.spec, on_event=self.events.append)
        fut: Future[None] = asyncio.run_coroutine_threadsafe(self.engine.start(), self.loop)
        fut.result(timeout=self.spec.startup_timeout + 60)
        eng = self.engine
        assert eng.url is not None and eng.startup_seconds is not None
        return RunningEngine(
            url=eng.url,
            served_model=eng.served_model,
            backend=eng.backend,
            startup_seconds=eng.startup_seconds,
            log_path=str(self.spec.log_path),
            pids=eng.tree_pids(),
            events=self.events,
        )

    def stop(self) -> None:
        if self.engine is not None:
            asyncio.run_coroutine_threadsafe(self.engine.stop(), self.loop).result(timeout=120)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
