"""tunelab SIGKILLed during a study, repeatedly: the store opens, nothing committed is lost,
no engine survives, and the study resumes where it stopped.

The study process is ``tests/support/fault_study.py`` (the real store,
recovery, studies' runner and trial runner) on the engine double; the
figures over many more kills come from ``benchmarks/fault_loops.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support import fault_procs
from tests.support.fault_killloop import kill_loop
from tuner.trials.model import TrialStatus
from tuner.trials.store import TrialStore


def test_random_sigkills_lose_nothing_and_leave_no_engine(tmp_path: Path) -> None:
    figures = kill_loop(tmp_path, kills=6, points=5, seed=20261122)
    assert figures.faults == 6
    assert figures.ok, figures.notes
    assert figures.lost == 0 and figures.orphans == 0
    # Every point of every study finished exactly once (no duplicate, none missing).
    assert figures.completed == 5 * figures.studies
    assert figures.restarts >= 7  # each kill is followed by a restart


def _start_study(db: Path, marker: str, token_ms: float) -> subprocess.Popen[str]:
    argv = ["--store", str(db), "--points", "1", "--token-ms", str(token_ms)]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.fault_study", *argv],
        cwd=fault_procs.REPO,
        env={**os.environ, fault_procs.MARKER: marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (an orphan's zombie waits for init to reap it)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_measuring(db: Path, timeout: float = 30.0) -> tuple[int, float]:
    """Polls the store until the trial is measuring; returns its engine's (pid, create time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            with TrialStore(db) as store:
                for trial in store.list():
                    if trial.status is TrialStatus.MEASURING and trial.engine_pid:
                        return trial.engine_pid, trial.engine_created or 0.0
        time.sleep(0.05)
    raise AssertionError("the study never reached the measured run")


@pytest.mark.parametrize("kill_reaper", [False, True], ids=["reaper-kills", "recovery-kills"])
def test_kill_during_the_measured_run_then_resume(tmp_path: Path, kill_reaper: bool) -> None:
    """SIGKILL while measuring. Either the reaper ends the engine, or — if the reaper was
    killed too — the next start's recovery does; the trial becomes interrupted and the
    study finishes on restart."""
    db = tmp_path / "s.db"
    marker = fault_procs.new_marker()
    proc = _start_study(db, marker, token_ms=40.0)
    try:
        engine_pid, _ = _wait_measuring(db)
        engine = psutil.Process(engine_pid)
        ipc = Path(engine.environ()["VLLM_RPC_BASE_PATH"])  # tuner.engine.ipc_dir's
        assert ipc.is_dir(), ipc
        reapers = [
            p
            for p in fault_procs.tagged(marker, exclude={proc.pid})
            if "tuner.engine.reaper" in " ".join(p.cmdline())
        ]
        assert reapers, "no reaper was started beside the engine"
        if kill_reaper:
            for reaper in reapers:
                reaper.kill()
            psutil.wait_procs(reapers, 5)
        proc.kill()
        proc.wait(10)
        if kill_reaper:
            time.sleep(1.0)
            assert _alive(engine), "the engine died without anyone killing it"
        else:
            t0 = time.monotonic()
            while _alive(engine) and time.monotonic() - t0 < 8:
                time.sleep(0.05)  # the reaper's job: gone within seconds
            assert time.monotonic() - t0 < 5.0
        with TrialStore(db) as store:
            (trial,) = store.list()
            assert trial.status is TrialStatus.MEASURING  # what the dead process left
        again = _start_study(db, marker, token_ms=1.0)
        out, _ = again.communicate(timeout=60)
        assert again.returncode == 0, out
        assert "RECOVERED" in out and "COMPLETE" in out, out
        assert not _alive(engine)
        assert not ipc.exists(), f"the killed engine's socket directory was left: {ipc}"
        with TrialStore(db) as store:
            trials = store.list()
        statuses = sorted(str(t.status) for t in trials)
        assert statuses == ["done", "interrupted"], statuses
        interrupted = next(t for t in trials if t.status is TrialStatus.INTERRUPTED)
        assert "measuring" in (interrupted.failure_reason or "")
        if kill_reaper:
            assert f"pid {engine_pid}" in (interrupted.failure_reason or "")
            assert "was killed" in (interrupted.failure_reason or "")
    finally:
        if proc.poll() is None:
            proc.kill()
        left = fault_procs.wait_untagged(marker, 8.0)
        fault_procs.kill_all(left)
    assert not left, f"survivors: {fault_procs.describe(left)}"


def test_store_written_by_a_killed_process_is_readable_by_plain_sqlite(tmp_path: Path) -> None:
    """After kills the database passes SQLite's own integrity check (WAL replayed)."""
    import sqlite3

    kill_loop(tmp_path, kills=2, points=2, seed=7)
    conn = sqlite3.connect(tmp_path / "kill-loop.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT status, results FROM trials WHERE status = 'done'").fetchall()
    finally:
        conn.close()
    assert len(rows) == 2 and all(json.loads(r[1]) for r in rows)


def test_random_sigkills_of_tunelab_tune_keep_both_stores_consistent(tmp_path: Path) -> None:
    """The same loop on tunelab's own resumable study command (``tunelab tune``, Optuna)."""
    from tests.support.fault_tuneloop import tune_kill_loop

    figures = tune_kill_loop(tmp_path, kills=5, seed=11)
    assert figures.faults == 5
    assert figures.orphans == 0 and figures.lost == 0 and figures.store_errors == 0, figures.notes
    assert figures.inconsistent == 0, figures.notes
    assert figures.completed >= 3  # the final run alone measures 3 points


def test_a_result_committed_before_the_kill_is_not_dropped_from_the_study(tmp_path: Path) -> None:
    """Killed while the engine shuts down (vLLM takes seconds): the trial is already done in
    the trial store, but Optuna was not yet told. On resume the study must count that
    measurement (tell COMPLETE from the stored results), not mark it FAIL/interrupted."""
    from optuna.trial import TrialState

    from tests.support.fault_tuneloop import ARGS, STUDY, _optuna_trials

    home = tmp_path / "home"
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    marker = fault_procs.new_marker()
    env = {
        **os.environ,
        "TUNELAB_HOME": str(home),
        "DOUBLE_TOKEN_MS": "2",
        "FAULT_STOP_DELAY_S": "4",
        fault_procs.MARKER: marker,
    }
    argv = [sys.executable, "-m", "tests.support.fault_tune_cli", *ARGS, "--storage", url]
    proc = subprocess.Popen(
        [*argv, "--trials", "1"],
        cwd=fault_procs.REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = home / "data" / "tunelab.db"
    try:
        deadline = time.monotonic() + 60
        done_id = None
        while done_id is None:
            assert time.monotonic() < deadline, "the trial never finished"
            assert proc.poll() is None, "tune ended before the kill (engine stop was not slow)"
            if db.exists():
                with TrialStore(db) as store:
                    done = store.list(STUDY, TrialStatus.DONE)
                done_id = done[0].id if done else None
            time.sleep(0.05)
        proc.kill()  # the result is committed; the engine is still shutting down
        proc.wait(10)
        resumed = subprocess.run(
            [*argv, "--trials", "1"],
            cwd=fault_procs.REPO,
            env={**env, "FAULT_STOP_DELAY_S": "0"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        left = fault_procs.wait_untagged(marker, 8.0)
        fault_procs.kill_all(left)
    assert not left, fault_procs.describe(left)
    with TrialStore(db) as store:
        assert store.get(done_id).status is TrialStatus.DONE  # the measurement is stored
    linked = next(f for f in _optuna_trials(url) if f.user_attrs.get("tunelab_trial_id") == done_id)
    assert linked.state is TrialState.COMPLETE, (
        f"optuna #{linked.number} is {linked.state.name} "
        f"(interrupted={linked.user_attrs.get('interrupted')}) although its tunelab trial "
        f"{done_id} finished with results: the resumed study dropped a completed measurement"
    )
