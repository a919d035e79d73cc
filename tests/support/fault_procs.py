"""Process helpers for the reliability suite: engine-double commands, markers and orphan scans.

Every fault test tags the processes it causes with a unique environment
variable (``FAULT_RUN_ID``) in the tunelab process; engines and reapers
inherit it, so after a fault the test finds *every* survivor by that tag —
not by name, which vLLM's renamed processes and the doubles would defeat.
The engine doubles are started through the trial runner's ``engine_command``
exactly where a real engine would be, so the runner, the store, the reaper
and the recovery are the real ones.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
MARKER = "FAULT_RUN_ID"


def new_marker() -> str:
    """A fresh tag value for one test's processes."""
    return uuid.uuid4().hex


def study_double_command(config: Any = None) -> list[str]:
    """The knob-sensitive engine double (starts in 0.1 s) in place of ``vllm serve``."""
    cmd = [sys.executable, "-m", "tests.support.study_engine_double"]
    cmd += ["--port", "{port}", "--host", "{host}"]
    seqs = None if config is None else config.engine.get("max-num-seqs")
    if seqs is not None:
        cmd += ["--max-num-seqs", str(seqs)]
    return cmd


def fault_engine_command(config: Any = None, *, record: Path | None = None) -> list[str]:
    """The double with long-lived children renamed like vLLM's engine core and worker."""
    cmd = [
        sys.executable,
        "-m",
        "tests.support.fault_engine",
        "--port",
        "{port}",
        "--host",
        "{host}",
    ]
    if record is not None:
        cmd += ["--record", str(record)]
    seqs = None if config is None else config.engine.get("max-num-seqs")
    if seqs is not None:
        cmd += ["--max-num-seqs", str(seqs)]
    return cmd


def tagged(marker: str, *, exclude: set[int] | None = None) -> list[psutil.Process]:
    """Live processes whose environment carries ``FAULT_RUN_ID=marker`` (zombies excluded)."""
    skip = {os.getpid(), *(exclude or set())}
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in skip:
            continue
        try:
            if proc.environ().get(MARKER) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def wait_untagged(
    marker: str, timeout: float = 8.0, *, exclude: set[int] | None = None
) -> list[psutil.Process]:
    """Waits until no tagged process is left; returns the ones still alive at the timeout."""
    deadline = time.monotonic() + timeout
    left = tagged(marker, exclude=exclude)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = tagged(marker, exclude=exclude)
    return left


def kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILLs leftovers so one failing test does not leak into the next."""
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            continue


def describe(procs: list[psutil.Process]) -> str:
    """``pid name cmdline`` of each process, for assertion messages."""
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {proc.name()} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            out.append(f"{proc.pid} (gone)")
    return "; ".join(out)


def pump_pty(fd: int, seconds: float) -> None:
    """Reads (and drops) a TUI's output so it never blocks on a full terminal."""
    import select

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return


def service_pid(home: Path) -> int | None:
    """The study service serving ``home`` (its TUNELAB_HOME), if one runs."""
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = proc.info["cmdline"] or []
            if "tuner.service.server" in cmd and (proc.info["environ"] or {}).get(
                "TUNELAB_HOME"
            ) == str(home):
                return proc.pid
        except psutil.Error:
            continue
    return None


def wait_until(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    pump: Callable[[], object] | None = None,
    step: float = 0.05,
) -> None:
    """Polls ``cond`` (calling ``pump`` first each time) until it holds or ``timeout`` passes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pump is not None:
            pump()
        if cond():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def processes_of(home: Path, keep: set[int]) -> list[str]:
    """Command lines of the processes running with ``TUNELAB_HOME=home``, but ``keep``'s.

    What a study, a job or a TUI left behind: its engines (vLLM's API server, engine core
    and workers inherit the variable) or its own processes.
    """
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "environ"]):
        try:
            mine = (proc.info["environ"] or {}).get("TUNELAB_HOME") == str(home)
            if mine and proc.pid not in keep:
                found.append(" ".join(proc.info["cmdline"] or [])[:160])
        except psutil.Error:
            continue
    return found


def end_pty_child(fd: int, pid: int, exited: bool) -> None:
    """Closes the terminal (when still open) and kills the child if it has not exited itself."""
    import contextlib
    import signal

    if fd >= 0:
        os.close(fd)
    with contextlib.suppress(ChildProcessError, ProcessLookupError):
        if not exited:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
