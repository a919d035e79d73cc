"""The real vLLM CPU engine: start, stream, backend report, fail fast, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.support.procs import alive as _alive
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import Engine, EngineSpec, EngineStartError
from tuner.engine.events import (
    EngineBackendChosen,
    EngineLog,
    EngineReady,
    EngineStarting,
    EngineStopped,
)

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[1]


def _tmp_sockets() -> set[str]:
    """Socket files at the top of the temp dir (where vLLM puts its own by default)."""
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.is_socket()}


async def test_real_engine_streams_reports_backend_and_leaves_nothing(
    demo_model_path: Path, tmp_path: Path
) -> None:
    events: list[object] = []
    spec = EngineSpec(
        config=EngineConfig(model=str(demo_model_path), engine=dict(DEMO_ENGINE_ARGS)),
        log_path=tmp_path / "engine.log",
    )
    engine = Engine(spec, on_event=events.append)
    sockets_before = _tmp_sockets()
    await engine.start()
    try:
        pids = engine.tree_pids()
        assert len(pids) >= 3, f"expected API server + engine core + worker, got {pids}"
        # vLLM put its IPC sockets where tunelab told it, not in the temp dir itself.
        ipc = engine.ipc_dir
        assert ipc is not None and any(p.is_socket() for p in ipc.iterdir()), ipc
        assert engine.url and engine.url.startswith("http://127.0.0.1:")
        chunks: list[str] = []
        async with (
            httpx.AsyncClient(timeout=60) as client,
            client.stream(
                "POST",
                f"{engine.url}/v1/completions",
                json={
                    "model": engine.served_model,
                    "prompt": "hello tunelab",
                    "max_tokens": 8,
                    "ignore_eos": True,
                    "stream": True,
                },
            ) as resp,
        ):
            assert resp.status_code == 200
            async for line in resp.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[6:])["choices"][0]["text"])
        assert len(chunks) == 8, chunks
        assert engine.backend == "CPU_ATTN"
    finally:
        await engine.stop()
    assert not _alive(pids), f"engine processes left behind: {_alive(pids)}"
    assert not ipc.exists(), f"the engine's socket directory was left: {ipc}"
    assert not _tmp_sockets() - sockets_before, "the engine left socket files in the temp dir"
    kinds = {type(e) for e in events}
    assert {EngineStarting, EngineLog, EngineBackendChosen, EngineReady, EngineStopped} <= kinds
    log_text = (tmp_path / "engine.log").read_text()
    assert "Starting vLLM" in log_text or "Application startup complete" in log_text


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


def test_sigkill_of_tunelab_leaves_no_engine(demo_model_path: Path, tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.hold_engine",
            str(demo_model_path),
            str(tmp_path / "e.log"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line, "holder exited before the engine was ready"
        held = json.loads(line)
        pids, ipc = set(held["pids"]), Path(held["ipc_dir"])
        assert len(_alive(pids)) >= 3 and ipc.is_dir()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 20
        while (_alive(pids) or ipc.exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pids), f"orphaned engine processes: {_alive(pids)}"
        assert not ipc.exists(), f"the reaper left the engine's socket directory: {ipc}"
    finally:
        if holder.poll() is None:
            holder.kill()
