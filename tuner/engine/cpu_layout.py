"""The CPU engine's processes laid out so that a measured run measures the engine, not the box.

On CPU, vLLM binds its worker to the cores it computes on and leaves the others
("reserved") to the rest, but its EngineCore process is not bound, and both it and the
worker busy-poll their shared-memory queue while requests run. On a small box the
EngineCore's loop then competes with the API server and the benchmark client for the free
cores: a client's TTFT excess over the engine's own figure jumped between +3 and +370 ms from
run to run, and whole launches of one config measured 989 beside 5,618 tok/s (the A/B test on
CI and in a rehearsal). With the EngineCore (and every other engine process) pinned beside
the worker and the API server on the remaining cores, the excess was +2.0 to +4.8 ms in each
of 27 runs (README, the client-agreement row). This module makes that layout for every CPU
engine tunelab starts for a trial; where the box cannot be split (one core, a worker vLLM did
not bind, more than one API server root) nothing is changed and the reason is returned.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import psutil

__all__ = ["Layout", "pin_threads", "split", "threads"]


@dataclass(frozen=True)
class Layout:
    """What :func:`split` did.

    Attributes:
        engine_cores: The cores the worker, EngineCore and their helpers now share.
        server_cores: The cores left to the API server (and the client).
        reason: Why nothing was changed ("" when the layout was made).
    """

    engine_cores: frozenset[int] = frozenset()
    server_cores: frozenset[int] = frozenset()
    reason: str = ""


def threads(pid: int) -> list[int]:
    """The thread ids of ``pid`` (none when it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def pin_threads(pid: int, cores: set[int]) -> None:
    """Every thread of ``pid`` onto ``cores`` (sched_setaffinity is per thread)."""
    for tid in threads(pid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cores)


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return ""


def split(root: int, tree: set[int]) -> Layout:
    """Pin the CPU engine's processes beside its worker and its API server (``root``) apart.

    Args:
        root: The API server's pid (the engine tree's root).
        tree: Every pid of the engine tree (the root included).
    """
    procs: dict[int, psutil.Process] = {}
    for pid in tree:
        with contextlib.suppress(psutil.Error):
            procs[pid] = psutil.Process(pid)
    workers = [p for p in procs.values() if _name(p).startswith("VLLM::Worker")]
    engine_cores: set[int] = set()
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            engine_cores |= set(worker.cpu_affinity() or [])
    everything = set(os.sched_getaffinity(0))
    free = everything - engine_cores
    if root not in procs:
        return Layout(reason="the API server is gone")
    if not workers or not engine_cores:
        return Layout(reason="no worker bound to cores (vLLM's OMP binding is off)")
    if not free:
        return Layout(reason="the worker's cores are all the cores: nothing to split")
    for pid in procs:
        pin_threads(pid, free if pid == root else engine_cores)
    return Layout(frozenset(engine_cores), frozenset(free))
