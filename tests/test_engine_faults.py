"""Engine lifecycle faults, with an engine double where vLLM itself is not under test."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from tuner.config import EngineConfig
from tuner.engine import Engine, EngineSpec, EngineStartError
from tuner.engine import server as server_mod
from tuner.engine.events import EngineExited

REPO = Path(__file__).resolve().parents[1]
DOUBLE = [sys.executable, str(REPO / "tests" / "support" / "health_double.py"), "{host}", "{port}"]


def _spec(tmp_path: Path, *mode: str, timeout: float = 30.0) -> EngineSpec:
    return EngineSpec(
        config=EngineConfig(model="double"),
        log_path=tmp_path / "engine.log",
        command=[*DOUBLE, *mode],
        startup_timeout=timeout,
        cwd=REPO,
    )


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_port_taken_between_choice_and_bind_is_retried(tmp_path: Path, monkeypatch) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    ports = iter([taken])
    real_free_port = server_mod.free_port
    monkeypatch.setattr(
        server_mod, "free_port", lambda host: next(ports, None) or real_free_port(host)
    )
    engine = Engine(_spec(tmp_path, "serve"))
    try:
        await engine.start()
        assert engine.port != taken
        assert engine.backend == "DOUBLE_ATTN"
    finally:
        await engine.stop()
        blocker.close()
    assert "Address already in use" in (tmp_path / "engine.log").read_text()


async def test_startup_hang_times_out_and_kills_the_tree(tmp_path: Path) -> None:
    engine = Engine(_spec(tmp_path, "hang", timeout=3.0))
    started = time.monotonic()
    with pytest.raises(EngineStartError, match="start-up timeout") as info:
        await engine.start()
    assert time.monotonic() - started < 20
    assert any("mode=hang" in line for line in info.value.log_tail)
    assert engine.pid is not None and _gone(engine.pid)


async def test_crash_after_ready_is_noticed_at_once(tmp_path: Path) -> None:
    events: list[object] = []
    engine = Engine(_spec(tmp_path, "crash-after", "1.0"), on_event=events.append)
    await engine.start()
    try:
        t0 = time.monotonic()
        await engine.exited.wait()
        noticed = time.monotonic() - t0
        assert noticed < 2.5  # the double exits ~1.0 s after ready; polling is every 0.1 s
        assert engine.failure_reason and "crashed on purpose" in engine.failure_reason
        assert any(isinstance(e, EngineExited) for e in events)
    finally:
        await engine.stop()


async def test_missing_interpreter_is_a_clear_error(tmp_path: Path) -> None:
    spec = EngineSpec(
        config=EngineConfig(model="m"),
        log_path=tmp_path / "e.log",
        python="/nonexistent/python",
        entry="module",
    )
    with pytest.raises(EngineStartError, match="tunelab doctor"):
        await Engine(spec).start()


def test_double_command_keeps_json_braces(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "serve")
    spec.command = [*DOUBLE, "--compilation-config", '{"cudagraph_mode":"FULL"}']
    argv = spec.argv(8123)
    assert argv[-1] == '{"cudagraph_mode":"FULL"}'
    assert "8123" in argv and "127.0.0.1" in argv
