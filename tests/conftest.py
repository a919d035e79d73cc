"""Shared fixtures: an isolated TUNELAB_HOME per test and one shared real CPU engine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_thread import EngineThread, RunningEngine

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def tunelab_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache/data dirs: nothing touches the user's real ones."""
    home = tmp_path_factory.mktemp("tunelab-home")
    monkeypatch.setenv("TUNELAB_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def session_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tunelab-session-home")


@pytest.fixture(scope="session")
def demo_model_path(session_home: Path) -> Path:
    """The generated tiny model, built once per session."""
    old = os.environ.get("TUNELAB_HOME")
    os.environ["TUNELAB_HOME"] = str(session_home)
    try:
        from tuner.demo_model import ensure_demo_model

        return ensure_demo_model()
    finally:
        if old is None:
            os.environ.pop("TUNELAB_HOME", None)
        else:
            os.environ["TUNELAB_HOME"] = old


@pytest.fixture(scope="session")
def cpu_engine(demo_model_path: Path, session_home: Path) -> Iterator[RunningEngine]:
    """One real vLLM CPU engine on the tiny model, shared by the whole session."""
    from tuner.config import EngineConfig
    from tuner.cpu_demo import DEMO_ENGINE_ARGS
    from tuner.engine import EngineSpec

    spec = EngineSpec(
        config=EngineConfig(model=str(demo_model_path), engine=dict(DEMO_ENGINE_ARGS)),
        log_path=session_home / "shared-engine.log",
        startup_timeout=600,
    )
    runner = EngineThread(spec)
    try:
        yield runner.start()
    finally:
        runner.stop()
