"""The real vLLM CPU engine refuses an argument: tunelab fails fast, with vLLM's reason.

Starting, streaming, the backend report, IPC sockets and what a killed tunelab
leaves are checked on the engine starts of tests/test_trials_engine.py (one
start per question, as CI's time asks).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.procs import alive as _alive
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import Engine, EngineSpec, EngineStartError

pytestmark = pytest.mark.engine


async def test_rejected_argument_fails_fast_with_the_cause(
    demo_model_path: Path, tmp_path: Path
) -> None:
    spec = EngineSpec(
        config=EngineConfig(
            model=str(demo_model_path),
            engine={**DEMO_ENGINE_ARGS, "attention-backend": "NOT_A_BACKEND"},
        ),
        log_path=tmp_path / "engine.log",
        startup_timeout=300,
    )
    engine = Engine(spec)
    started = time.monotonic()
    with pytest.raises(EngineStartError) as info:
        await engine.start()
    elapsed = time.monotonic() - started
    assert "NOT_A_BACKEND" in info.value.reason, info.value.reason
    assert "attention backend" in info.value.reason.lower()
    # vLLM rejects it while parsing arguments (~10 s on 2 cores); the timeout is 300 s.
    assert elapsed < 60, f"failure took {elapsed:.1f} s: it waited instead of noticing the exit"
    assert engine.pid is not None and not _alive({engine.pid})
