"""Process trees: find every process an engine spawned and end them all.

vLLM forks an engine-core process and worker processes that rename
themselves ("VLLM::EngineCore", "VLLM::Worker"), so nothing here matches by
name: the tree is the root's descendants (psutil) plus every process still in
the root's process group (the server runs in its own session, so its group
id is its pid). Each process is remembered with its create time, so a reused
pid is never killed by mistake.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass

import psutil

_PF_EXITING = 0x4  # Linux task flag: the process is being torn down


def exiting(pid: int) -> bool:
    """True once Linux has begun tearing the process down (e.g. after SIGKILL).

    A vLLM worker holding gigabytes of KV cache takes about a second to finish
    exiting after SIGKILL and psutil reports it running until then; the kernel
    sets PF_EXITING at once, visible in /proc/PID/stat. Elsewhere: False.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    try:
        flags = int(stat[stat.rindex(b")") + 2 :].split()[6])
    except (ValueError, IndexError):
        return False
    return bool(flags & _PF_EXITING)


@dataclass(frozen=True)
class ProcRef:
    """A pid pinned to its create time (guards against pid reuse)."""

    pid: int
    created: float

    def alive(self) -> bool:
        """Running and not already being torn down (a zombie or an exiting task is dead)."""
        try:
            proc = psutil.Process(self.pid)
            if proc.create_time() != self.created or proc.status() == psutil.STATUS_ZOMBIE:
                return False
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False
        return not exiting(self.pid)

    def name(self) -> str:
        """The process name now (vLLM renames its children), for messages only."""
        try:
            return psutil.Process(self.pid).name()
        except psutil.Error:
            return "process"

    def send(self, sig: int) -> None:
        if not self.alive():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, sig)


def ref(pid: int) -> ProcRef | None:
    try:
        return ProcRef(pid, psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def tree(root_pid: int, pgid: int | None = None) -> set[ProcRef]:
    """The root, its descendants, and the members of its process group."""
    found: set[ProcRef] = set()
    try:
        root = psutil.Process(root_pid)
        found.add(ProcRef(root.pid, root.create_time()))
        for child in root.children(recursive=True):
            try:
                found.add(ProcRef(child.pid, child.create_time()))
            except psutil.Error:
                continue
    except psutil.Error:
        pass
    if pgid is not None:
        for proc in psutil.process_iter(["pid", "create_time"]):
            try:
                if os.getpgid(proc.pid) == pgid:
                    found.add(ProcRef(proc.pid, proc.info["create_time"]))
            except (ProcessLookupError, PermissionError, psutil.Error):
                continue
    return found


# The variable the trial runner puts into each engine's environment: a random
# token, also stored in the trial's row, that proves a process is an engine
# this tunelab started (issue 19: a handed-over store must not kill anything).
TOKEN_ENV = "TUNELAB_ENGINE_TOKEN"


def proven_engine(pid: int | None, created: float | None, token: str | None) -> bool:
    """Whether ``pid`` is provably the engine a trial row names.

    All three must hold: the pid runs, its create time equals the recorded one
    (so a reused pid fails), and its environment carries ``token`` under
    :data:`TOKEN_ENV` (so a pid and create time copied from another machine's
    or a forged store fail). Anything unreadable (another user's process,
    AccessDenied, no /proc) counts as not proven: recovery then leaves it alone.
    """
    if not pid or created is None or not token:
        return False
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - created) > 0.01:
            return False
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return proc.environ().get(TOKEN_ENV) == token
    except (psutil.Error, OSError):
        return False


def alive(refs: set[ProcRef]) -> set[ProcRef]:
    return {r for r in refs if r.alive()}


def kill_tree(
    root_pid: int,
    *,
    known: set[ProcRef] | None = None,
    graceful: float = 10.0,
    term: float = 5.0,
) -> set[ProcRef]:
    """Ends the tree: SIGINT to the root (vLLM's clean shutdown), then SIGTERM, then SIGKILL.

    Returns the processes still alive at the end (empty unless the kernel
    refused a SIGKILL). Blocking: call it from a thread in async code.
    """
    pgid = root_pid
    members = tree(root_pid, pgid) | (known or set())
    root = next((m for m in members if m.pid == root_pid), None)
    if root is not None and graceful > 0:
        root.send(signal.SIGINT)
        members |= _wait_gone(members, graceful, root_pid, pgid)
    if alive(members) and term > 0:
        for member in alive(members):
            member.send(signal.SIGTERM)
        members |= _wait_gone(members, term, root_pid, pgid)
    for member in alive(members):
        member.send(signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    _wait_gone(members, 5.0, root_pid, pgid)
    return alive(members)


def _wait_gone(members: set[ProcRef], seconds: float, root_pid: int, pgid: int) -> set[ProcRef]:
    """Waits until all are gone or time is up; picks up late children meanwhile."""
    deadline = time.monotonic() + seconds
    seen = set(members)
    while time.monotonic() < deadline:
        seen |= (
            tree(root_pid, pgid) if any(m.pid == root_pid and m.alive() for m in seen) else set()
        )
        if not alive(seen):
            break
        time.sleep(0.05)
    return seen
