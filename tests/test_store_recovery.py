"""Recovery kills only what it provably started, and never from a read-only command (issue 19).

A store can be handed over or shared, so a row naming a pid is not a licence
to kill it: pid, create time and the random token in the engine's
environment must all match. Every case runs a real live process and checks
that it survives (or, with the full proof, that its whole tree is gone).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli import options as opt
from tuner.cli.app import app as cli_app
from tuner.cli.app import register_all
from tuner.config import EngineConfig
from tuner.engine import proctree
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

TOKEN = "a" * 32


def _dead_owner() -> tuple[int, float]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    created = psutil.Process(proc.pid).create_time()
    proc.wait()
    return proc.pid, created


def _spawn(token: str | None) -> subprocess.Popen[bytes]:
    """A leftover-engine double: a shell with a sleeping child, in its own session."""
    env = {k: v for k, v in os.environ.items() if k != proctree.TOKEN_ENV}
    if token is not None:
        env[proctree.TOKEN_ENV] = token
    proc = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], env=env, start_new_session=True)
    deadline = time.monotonic() + 5
    while not psutil.Process(proc.pid).children():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return proc


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        for child in proctree.tree(proc.pid, proc.pid):
            child.send(9)
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)


def _orphan_row(
    db: Path, pid: int, created: float | None, token: str | None, study: str = "s"
) -> Trial:
    owner, owner_created = _dead_owner()
    trial = Trial(
        EngineConfig(model="org/m", engine={"max-num-seqs": 8}),
        Workload(input_len=8, output_len=8, num_prompts=2),
        study=study,
    )
    with TrialStore(db) as store:
        store.add(trial)
        store.update_status(
            trial,
            TrialStatus.MEASURING,
            owner_pid=owner,
            owner_created=owner_created,
            engine_pid=pid,
            engine_created=created,
            engine_token=token,
        )
    return trial


def _tree_alive(proc: subprocess.Popen[bytes]) -> bool:
    members = proctree.tree(proc.pid, proc.pid)
    return proc.poll() is None and len(proctree.alive(members)) == 2


@pytest.mark.parametrize(
    "case", ["null-create-time", "wrong-create-time", "no-token-in-row", "token-not-in-env"]
)
def test_recovery_never_kills_an_unproven_process(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], case: str
) -> None:
    """The row points at a live process tunelab cannot prove it started: it survives."""
    victim = _spawn(token=None if case == "token-not-in-env" else TOKEN)
    procs.append(victim)
    created = psutil.Process(victim.pid).create_time()
    row = {
        "null-create-time": (None, TOKEN),
        "wrong-create-time": (created - 50.0, TOKEN),
        "no-token-in-row": (created, None),
        "token-not-in-env": (created, TOKEN),
    }[case]
    trial = _orphan_row(tmp_path / "t.db", victim.pid, *row)
    with TrialStore(tmp_path / "t.db") as store:
        recovered = store.recover()
        assert [t.id for t in recovered] == [trial.id]  # marked interrupted, nothing killed
        back = store.get(trial.id)
    time.sleep(0.3)
    assert _tree_alive(victim), f"recovery killed an unproven process ({case})"
    assert back.status is TrialStatus.INTERRUPTED
    reason = back.failure_reason or ""
    assert "was killed" not in reason
    if case != "wrong-create-time":  # (a wrong create time is simply another process)
        assert f"pid {victim.pid}" in reason and "left alone" in reason


def test_recovery_needs_the_exact_token(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    victim = _spawn(token="b" * 32)
    procs.append(victim)
    _orphan_row(tmp_path / "t.db", victim.pid, psutil.Process(victim.pid).create_time(), TOKEN)
    with TrialStore(tmp_path / "t.db") as store:
        store.recover()
    time.sleep(0.3)
    assert _tree_alive(victim)


def _cli(*args: str) -> tuple[int, str]:
    register_all(cli_app)
    result = CliRunner().invoke(cli_app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_read_only_commands_never_recover_or_kill(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Even a fully proven leftover engine is left to commands that run trials."""
    engine = _spawn(token=TOKEN)
    procs.append(engine)
    db = tmp_path / "t.db"
    trial = _orphan_row(db, engine.pid, psutil.Process(engine.pid).create_time(), TOKEN)
    for args in (
        ["results", "--json", "--store", str(db)],
        ["results", "--store", str(db)],
        ["show", trial.id, "--store", str(db)],
        ["show", trial.id, "--json", "--store", str(db)],
        ["winner", "--study", "s", "--store", str(db)],
    ):
        _cli(*args)
        assert _tree_alive(engine), f"`tunelab {' '.join(args)}` killed a process"
        with TrialStore(db) as store:
            assert store.get(trial.id).status is TrialStatus.MEASURING, args


def test_a_proven_leftover_engine_is_reaped_by_a_running_command(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """pid + create time + token: the store a trial-running command opens kills the tree."""
    engine = _spawn(token=TOKEN)
    procs.append(engine)
    tree = proctree.tree(engine.pid, engine.pid)
    assert len(tree) == 2
    db = tmp_path / "t.db"
    trial = _orphan_row(db, engine.pid, psutil.Process(engine.pid).create_time(), TOKEN)
    # What `tunelab run / ab / sweep / tune` do before they start anything.
    with opt.open_store("run", str(db), recover=True) as store:
        back = store.get(trial.id)
    engine.wait(10)
    deadline = time.monotonic() + 5
    while proctree.alive(tree):
        assert time.monotonic() < deadline, "the proven leftover engine tree survived"
        time.sleep(0.05)
    assert back.status is TrialStatus.INTERRUPTED
    assert f"pid {engine.pid}" in (back.failure_reason or "")
    assert "was killed" in (back.failure_reason or "")
    assert back.engine_token is None
