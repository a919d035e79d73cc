"""The SSH session drops while the TUI runs a trial: no engine survives, the store stays sound.

The real ``TunelabApp`` runs in a pseudo-terminal (``tests/support/fault_tui.py``,
engine double in place of vLLM). A run is started with the ``r`` key; once
the store shows the trial measuring, the terminal's master side is closed —
what sshd does when the connection drops — so the kernel sends SIGHUP to the
TUI. Then: the TUI is gone within seconds, every process it started
(engine, reaper) is gone, the store passes SQLite's integrity check, and
after the recovery the next start performs, no trial is left active.
"""

from __future__ import annotations

import os
import pty
import signal
import sqlite3
import sys
import time
from pathlib import Path

from tests.support import fault_procs
from tuner.trials.model import TrialStatus
from tuner.trials.store import TrialStore


def _measuring(db: Path) -> bool:
    if not db.exists():
        return False
    with TrialStore(db) as store:
        return any(t.status is TrialStatus.MEASURING for t in store.list())


def test_hangup_during_a_run(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    marker = fault_procs.new_marker()
    env = {
        **os.environ,
        fault_procs.MARKER: marker,
        "DOUBLE_TOKEN_MS": "100",  # the double's run lasts long enough to be cut
        "TUNELAB_HOME": str(tmp_path / "home"),
        "TERM": "xterm-256color",
        "COLUMNS": "160",
        "LINES": "48",
    }
    pid, fd = pty.fork()
    if pid == 0:  # the child: become the TUI at once
        # sshd's children get SIGHUP's default action; a runner under nohup would
        # hand down SIG_IGN and the hang-up would never reach the TUI.
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.chdir(fault_procs.REPO)
        os.execve(
            sys.executable,
            [sys.executable, "-m", "tests.support.fault_tui", "--store", str(db)],
            env,
        )
    status = None
    try:
        deadline = time.monotonic() + 90
        while not _measuring(db):
            assert time.monotonic() < deadline, "the TUI never started measuring"
            if not db.exists():
                os.write(fd, b"r")  # Run (repeated until the app has settled and takes it)
            fault_procs.pump_pty(fd, 1.0)
        assert fault_procs.tagged(marker, exclude={pid}), "no engine is running"
        os.close(fd)  # the connection drops: the kernel hangs up the TUI's terminal
        fd = -1
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:  # (0, 0) while it still runs: only a reaped child sets status
                status = code
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the TUI survived the hang-up for 10 s")
        left = fault_procs.wait_untagged(marker, 8.0, exclude={pid})
        gone_after = time.monotonic() - t0
    finally:
        fault_procs.end_pty_child(fd, pid, exited=status is not None)
    fault_procs.kill_all(left)
    assert not left, f"survived the hang-up: {fault_procs.describe(left)}"
    assert gone_after < 5.0, f"the engine tree took {gone_after:.1f} s to go"
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    with TrialStore(db) as store:
        store.recover()  # what the next tunelab start does
        trials = store.list()
    assert trials and not [t for t in trials if t.status.active], [(t.id, t.status) for t in trials]
    cut = [t for t in trials if t.status is TrialStatus.INTERRUPTED]
    assert cut and "measuring" in (cut[0].failure_reason or "")
