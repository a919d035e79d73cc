"""Which of some pids are still running processes (zombies count as gone)."""

from __future__ import annotations

from collections.abc import Iterable

import psutil


def alive(pids: Iterable[int]) -> set[int]:
    """The pids that name a live, non-zombie process."""
    out = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.add(pid)
        except psutil.NoSuchProcess:
            continue
    return out
