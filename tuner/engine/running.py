"""Which engines this process is running now, and how much CPU and memory they use.

Every :class:`~tuner.engine.server.Engine` registers its root pid here while
its server is up, so the TUI's host line can report the engines' load and
nothing else: the reaper sidecars, a bench helper or any other child of the
tunelab process are not "the engine". The module is cheap to import (psutil
and the process-tree helpers): the TUI reads it once a second from start-up on.
"""

from __future__ import annotations

import threading

import psutil

from tuner.engine import proctree

_LOCK = threading.Lock()
_ROOTS: set[int] = set()
# Engines another tunelab process runs for a study this one follows (the study service's
# job a TUI attached to): root pid -> its start time, which proves the pid is still it.
_FOLLOWED: dict[int, float | None] = {}


def register(root_pid: int) -> None:
    """An engine's server process started (called by Engine)."""
    with _LOCK:
        _ROOTS.add(root_pid)


def unregister(root_pid: int) -> None:
    """An engine's server process was stopped or reaped (called by Engine)."""
    with _LOCK:
        _ROOTS.discard(root_pid)


def follow(root_pid: int, created: float | None) -> None:
    """Count an engine another process runs for a study this one shows (an attached job).

    ``created`` is the root's start time as the trial recorded it: a pid reused by
    another process after the engine ended is never counted as the engine.
    """
    with _LOCK:
        _FOLLOWED[root_pid] = created


def unfollow(root_pid: int | None = None) -> None:
    """Stop counting a followed engine (None: every one)."""
    with _LOCK:
        if root_pid is None:
            _FOLLOWED.clear()
        else:
            _FOLLOWED.pop(root_pid, None)


def roots() -> set[int]:
    """Root pids of the engines this process started, or follows, and that still run."""
    with _LOCK:
        own, followed = set(_ROOTS), dict(_FOLLOWED)
    for pid, created in followed.items():
        try:
            alive = psutil.Process(pid)
            if created is None or abs(alive.create_time() - created) <= 0.01:
                own.add(pid)
        except psutil.Error:
            continue
    return own


def engine_pids() -> set[int]:
    """Every live process of every engine this process runs (root and descendants)."""
    found: set[int] = set()
    for root in roots():
        found |= {ref.pid for ref in proctree.tree(root)}
    return found


class EngineLoad:
    """CPU and resident memory of the running engines' processes, sampled on demand.

    Attributes:
        procs: How many engine processes the last sample found (0: no engine).
        cpu: Their CPU use in percent of one core, summed, since the previous sample.
        rss: Their resident memory in bytes, summed.
    """

    def __init__(self) -> None:
        self._seen: dict[int, psutil.Process] = {}
        self.procs = 0
        self.cpu = 0.0
        self.rss = 0

    def sample(self) -> EngineLoad:
        """One reading; CPU % is since the previous reading (psutil's interval-less form)."""
        procs, cpu, rss = 0, 0.0, 0
        current: dict[int, psutil.Process] = {}
        for pid in engine_pids():
            try:
                proc = self._seen.get(pid) or psutil.Process(pid)
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
            current[pid] = proc
            procs += 1
        self._seen = current
        self.procs, self.cpu, self.rss = procs, cpu, rss
        return self
