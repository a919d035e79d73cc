"""Who runs a search's point: its worker's identity, whether it lives, and its heartbeat.

Several ``tunelab tune`` processes (on one node or many, one Optuna storage) work on one
study; a point whose worker was killed must be told apart from one still being measured.
Each Optuna trial records its owner (host, pid, process start time) right after ``ask``
and a heartbeat while it runs: a worker on this host is gone when its process is, one
elsewhere when its heartbeat is older than the grace period
(:func:`tuner.studies.search.recover_study` decides on these).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
import threading
from typing import Any

import psutil

from tuner.studies.optuna_store import GRACE_S, HEARTBEAT_S

__all__ = ["Heartbeat", "owner_alive", "worker_owner"]


def worker_owner() -> dict[str, Any]:

    proc = psutil.Process()
    return {"host": socket.gethostname(), "pid": os.getpid(), "created": proc.create_time()}


def owner_alive(frozen: Any) -> bool | None:
    """Whether the worker running ``frozen`` lives: True/False when it can tell, None when not.

    The owner (host, pid, process start time) is one user attr, written in one
    call right after ``ask``. A trial of this host whose owner process is gone
    is dead. Without the attr the worker may be between ``ask`` and writing it
    — alive unless that was longer than the grace period ago. Another host's
    worker cannot be checked here: its heartbeat decides (None).
    """

    owner = frozen.user_attrs.get("owner")
    if not isinstance(owner, dict):
        started = frozen.datetime_start
        if started is None:
            return None
        age = datetime.datetime.now() - started
        return None if age.total_seconds() < GRACE_S else False
    if owner.get("host") != socket.gethostname():
        return None
    pid, created = owner.get("pid"), owner.get("created")
    if not isinstance(pid, int):
        return False
    try:
        proc = psutil.Process(pid)
        return created is None or abs(proc.create_time() - float(created)) < 1.0
    except psutil.Error:
        return False


class Heartbeat:
    """Records the Optuna trial's heartbeat while its tunelab trial runs."""

    def __init__(self, storage: Any, trial_id: int) -> None:
        self._storage, self._trial_id = storage, trial_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="optuna-heartbeat")

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self._storage.record_heartbeat(self._trial_id)
            self._stop.wait(HEARTBEAT_S)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
