"""Talking to the study service, and starting it when nobody answers.

Every client (``tunelab jobs``, later the TUI) goes through
:class:`ServiceClient`: httpx over the Unix socket. The first request that
finds no service starts one (``python -m tuner.service.server`` in its own
session, output to ``jobs/service.log``) and waits for its socket; two
clients doing that at once are fine, the service's lock lets one win.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.errors import TunelabError
from tuner.service import paths
from tuner.service.jobs import JobState
from tuner.trials.event_codec import Stamped, decode_all
from tuner.trials.events import TrialEvent

START_TIMEOUT = 20.0
JOB_ENTRY_ENV = "TUNELAB_JOB_ENTRY"


class ServiceError(TunelabError):
    """The service could not be reached, or refused a request."""


@dataclass(frozen=True)
class LogChunk:
    """The log a job wrote since an offset, the offset to ask from next, its state."""

    text: str
    next_offset: int
    state: str

    @property
    def ended(self) -> bool:
        return JobState(self.state).ended


@dataclass(frozen=True)
class EventChunk:
    """The events a job wrote since an offset (with their times), the offset to ask from next,
    its state."""

    stamped: list[Stamped]
    next_offset: int
    state: str

    @property
    def events(self) -> list[TrialEvent]:
        return [s.event for s in self.stamped]

    @property
    def ended(self) -> bool:
        return JobState(self.state).ended


def tunelab_argv(args: list[str]) -> list[str]:
    """The command line that runs ``tunelab ARGS`` in this environment.

    ``TUNELAB_JOB_ENTRY`` (a Python module) replaces tunelab's own entry point,
    for tests that run the CLI with the engine double in place of vLLM.
    """
    entry = os.environ.get(JOB_ENTRY_ENV, "tui")
    return [sys.executable, "-m", entry, *args]


class ServiceClient:
    """A connection to this user's service (started on first use when ``start``)."""

    def __init__(self, start: bool = True) -> None:
        self.socket = paths.socket_path()
        self.start = start
        self._http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket)),
            base_url="http://tunelab-service",
            timeout=30.0,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connection -------------------------------------------------------------------
    def running(self) -> bool:
        try:
            return self._http.get("/health", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    def ensure(self) -> None:
        """The service answers, starting it if needed; ServiceError when it will not."""
        if self.running():
            return
        if not self.start:
            raise ServiceError(
                "no tunelab service is running, so there are no jobs to show",
                fix="start work with `tunelab jobs start -- <command>`",
            )
        log = paths.jobs_dir() / "service.log"
        with open(log, "ab") as out:
            subprocess.Popen(
                [sys.executable, "-m", "tuner.service.server"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        end = time.monotonic() + START_TIMEOUT
        while time.monotonic() < end:
            if self.running():
                return
            time.sleep(0.1)
        raise ServiceError(
            f"the tunelab service did not answer on {self.socket} within {START_TIMEOUT:.0f} s",
            fix=f"see its log: {log}",
        )

    def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        self.ensure()
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise ServiceError(
                f"the tunelab service stopped answering ({exc})",
                fix="run the command again: it restarts the service, and running jobs go on",
            ) from None
        if response.status_code == 404:
            raise ServiceError(
                f"no job {url.split('/')[2]!r} (or the prefix matches several jobs)",
                fix="list them with `tunelab jobs`",
            )
        if response.status_code >= 400:
            raise ServiceError(f"the service refused: {response.text}", fix="check the command")
        return response

    # -- jobs ---------------------------------------------------------------------------
    def submit(
        self,
        args: list[str],
        cwd: str | None = None,
        *,
        title: str | None = None,
        meta: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Queues ``tunelab ARGS`` as a job with this shell's environment and directory."""
        body = {
            "argv": tunelab_argv(args),
            "title": title or "tunelab " + " ".join(args),
            "cwd": cwd or os.getcwd(),
            "env": dict(os.environ),
            "meta": meta or {},
        }
        return self._call("POST", "/jobs", json=body).json()

    def jobs(self) -> list[dict[str, Any]]:
        return self._call("GET", "/jobs").json()

    def recorded_jobs(self) -> list[dict[str, Any]]:
        """Every job this user has, oldest first; [] without starting a service when none
        was ever recorded (a service that ended itself while idle reloads the table)."""
        if not self.running() and not (paths.jobs_dir() / "jobs.json").exists():
            return []
        return sorted(self.jobs(), key=lambda j: j["submitted"])

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/jobs/{job_id}").json()

    def stop(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/jobs/{job_id}/stop").json()

    def log(self, job_id: str, offset: int = 0) -> LogChunk:
        response = self._call("GET", f"/jobs/{job_id}/log", params={"offset": offset})
        return LogChunk(
            response.text,
            int(response.headers["X-Next-Offset"]),
            response.headers["X-Job-State"],
        )

    def events(self, job_id: str, offset: int = 0) -> EventChunk:
        """The trial events the job wrote from ``offset`` on (tuner.trials.event_codec)."""
        data = self._call("GET", f"/jobs/{job_id}/events", params={"offset": offset}).json()
        stamped = list(decode_all(data["events"]))
        return EventChunk(stamped, int(data["next_offset"]), str(data["state"]))

    def follow(
        self, job_id: str, write: Callable[[str], None], poll: float = 0.5, offset: int = 0
    ) -> dict[str, Any]:
        """Writes the job's log as it grows until the job ends; returns the ended job."""
        while True:
            chunk = self.log(job_id, offset)
            if chunk.text:
                write(chunk.text)
            offset = chunk.next_offset
            if chunk.ended:
                rest = self.log(job_id, offset)
                if rest.text:
                    write(rest.text)
                return self.job(job_id)
            time.sleep(poll)
