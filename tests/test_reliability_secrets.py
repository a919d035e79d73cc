"""A real trial and its export: the engine listens on loopback only, and no secret leaks.

Secrets of the user's shell (``HF_TOKEN`` and friends) are set to a canary
value before a real trial on the vLLM CPU engine and a full export of that
trial. Then every file under TUNELAB_HOME (the store, the engine log
tunelab writes from vLLM's output, caches) and in the export directory is
searched byte by byte for the canary. While the engine runs, every listening
socket of its whole process tree is checked to be bound to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from tests.support import fault_procs
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.trials.events import TrialProgress
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

CANARY = "hf_CANARY_7c1e_must_never_be_written"
SECRETS = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
)


def listening(pid: int) -> list[tuple[int, str, int]]:
    """(pid, ip, port) of every listening inet socket of ``pid`` and its descendants."""
    out = []
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    out.append((proc.pid, conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            continue
    return out


def files_containing(root: Path, needle: bytes) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    hits.append(str(path))
            except OSError:
                continue
    return hits


@pytest.mark.engine
async def test_real_trial_and_export_bind_loopback_and_never_write_a_secret(
    tmp_path: Path, tunelab_home: Path, demo_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tuner.cli.app import register_all
    from tuner.cpu_demo import DEMO_ENGINE_ARGS
    from tuner.trials.runner import run_trial

    marker = fault_procs.new_marker()
    monkeypatch.setenv(fault_procs.MARKER, marker)
    for name in SECRETS:
        monkeypatch.setenv(name, CANARY)
    config = EngineConfig(model=str(demo_model_path), engine=dict(DEMO_ENGINE_ARGS))
    trial = Trial(
        config=config, workload=Workload(input_len=16, output_len=16, num_prompts=8, concurrency=4)
    )
    sockets: list[tuple[int, str, int]] = []

    def on_event(event: object) -> None:
        if isinstance(event, TrialProgress) and not sockets and trial.engine_pid:
            sockets.extend(listening(trial.engine_pid))

    store = TrialStore()  # the default store, under TUNELAB_HOME
    async with asyncio.timeout(900):
        await run_trial(trial, store, on_event=on_event, startup_timeout=600)
    store.close()
    assert trial.status is TrialStatus.DONE, trial.failure_reason
    assert sockets, "no listening socket seen while the engine ran"
    assert {ip for _, ip, _ in sockets} == {"127.0.0.1"}, sockets

    out = tmp_path / "export"
    app = register_all(__import__("typer").Typer())
    for argv in (
        ["export", trial.id, "--out", str(out)],
        ["show", trial.id, "--json"],
        ["results", "--csv"],
    ):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
        assert CANARY not in result.output, argv
    assert sorted(p.suffix for p in out.iterdir()) == [".sh", ".sh", ".toml", ".yaml"]
    assert Path(trial.log_path or "").is_file()
    leaks = files_containing(tunelab_home, CANARY.encode()) + files_containing(out, CANARY.encode())
    assert not leaks, f"the canary secret was written to {leaks}"
    left = fault_procs.wait_untagged(marker, 10.0)
    fault_procs.kill_all(left)
    assert not left, fault_procs.describe(left)


def test_storage_url_password_never_in_messages() -> None:
    """``tune --storage postgresql://u:PASSWORD@...``: errors name the URL without its password."""
    from tuner.studies.search import SearchError, open_storage

    canary = "CANARYpw42"
    for url in (f"postgresql://u:{canary}@127.0.0.1:1/db", f"nosuch://u:{canary}@h/db"):
        try:
            open_storage(url)
        except SearchError as exc:
            assert canary not in str(exc)
            assert "u:***@" in str(exc)
        else:  # pragma: no cover - nothing listens on port 1
            raise AssertionError("opening a storage on port 1 succeeded")
