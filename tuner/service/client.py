"""Talking to the study service, and starting it when nobody answers.

Every client (``tunelab jobs``, the TUI) goes through :class:`ServiceClient`.
The first request that finds no service starts one (``python -m
tuner.service.server`` in its own session, output to ``jobs/service.log``)
and waits for its socket; two clients doing that at once are fine, the
service's lock lets one win.

The first request a client sends carries its whole environment, tokens
included. So each request goes over a fresh connection whose peer the kernel
has named before a byte is sent (:func:`tuner.service.peer.check_server`):
a socket served by another user is refused with a message, whatever the
directory checks said. The HTTP is the standard library's ``http.client`` on
a Unix socket connected here: httpx cannot check the peer of the socket it
opens without reaching into its private connection pool, and a plain
``HTTPConnection`` whose ``connect`` does the check is the smallest client
that cannot skip it.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode

from tuner import bounded
from tuner.bounded import loads as json_loads
from tuner.redact import redact_argv
from tuner.service import paths, peer
from tuner.service.errors import ServiceError, UnsafeServiceDirError
from tuner.service.jobs import JobState, one_line
from tuner.trials.event_codec import Stamped, decode_all
from tuner.trials.events import TrialEvent

START_TIMEOUT = 20.0
JOB_ENTRY_ENV = "TUNELAB_JOB_ENTRY"
MAX_REPLY = 64 * bounded.MIB
CLIENT_TITLE = 200  # characters of a default title (the service keeps at most 300)

__all__ = ["ServiceClient", "ServiceError", "UnsafeServiceDirError", "tunelab_argv"]


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


class PeerCheckedConnection(http.client.HTTPConnection):
    """HTTP over the service's Unix socket, refusing it before sending when another user
    serves it."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("tunelab-service", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.path)
            peer.check_server(sock, self.path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class Reply:
    """One answer of the service: status, headers, body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        try:
            return bounded.loads(self.content, what="service answer")
        except ValueError:
            raise ServiceError(
                f"the tunelab service answered something that is not JSON: {self.text[:200]!r}",
                fix="run the command again; the service's log says more (jobs/service.log)",
            ) from None


class ServiceClient:
    """A connection to this user's service (started on first use when ``start``).

    Raises:
        ServiceError: (on creation) the socket's directory is not private to this user.
    """

    def __init__(self, start: bool = True, timeout: float = 30.0) -> None:
        self.socket = paths.socket_path()
        self.start = start
        self.timeout = timeout

    def close(self) -> None:
        """Nothing to close: each request has its own connection (checked each time)."""

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, object] | None = None,
        json_body: object = None,
        timeout: float | None = None,
    ) -> Reply:
        """One request on a fresh, peer-checked connection.

        Raises:
            ForeignPeerError: another user serves the socket (nothing was sent).
            OSError, http.client.HTTPException: no service answered.
        """
        if params:
            url = f"{url}?{urlencode(params)}"
        body = None if json_body is None else json.dumps(json_body).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn = PeerCheckedConnection(str(self.socket), timeout or self.timeout)
        try:
            conn.request(method, url, body=body, headers=headers)
            answer = conn.getresponse()
            content = answer.read(MAX_REPLY + 1)
            if len(content) > MAX_REPLY:
                raise ServiceError(
                    f"the tunelab service answered more than {MAX_REPLY} bytes",
                    fix="run the command again",
                )
            return Reply(answer.status, answer.headers, content)  # type: ignore[arg-type]
        finally:
            conn.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connection -------------------------------------------------------------------
    def running(self) -> bool:
        """Whether a service of this user answers (ForeignPeerError when another's does)."""
        try:
            return self.request("GET", "/health", timeout=2.0).status_code == 200
        except (OSError, http.client.HTTPException):
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
        with os.fdopen(paths.open_private(log, os.O_WRONLY | os.O_APPEND), "ab") as out:
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

    def _call(self, method: str, url: str, **kwargs: Any) -> Reply:
        self.ensure()
        try:
            response = self.request(method, url, **kwargs)
        except (OSError, http.client.HTTPException) as exc:
            raise ServiceError(
                f"the tunelab service stopped answering ({exc})",
                fix="run the command again: it restarts the service, and running jobs go on",
            ) from None
        if response.status_code == 404 and url.startswith("/jobs/"):
            raise ServiceError(
                f"no job {one_line(unquote(url.split('/')[2]), 40)!r} (or the prefix matches "
                "several jobs)",
                fix="list them with `tunelab jobs`",
            )
        if response.status_code >= 400:
            raise ServiceError(
                f"the service refused: {one_line(_error_text(response), 500)}",
                fix="check the command",
            )
        return response

    @staticmethod
    def _job_url(job_id: str, tail: str = "") -> str:
        """``/jobs/ID[/tail]`` with the id quoted: a prefix typed by a user stays one segment."""
        return f"/jobs/{quote(job_id, safe='')}{tail}"

    # -- jobs ---------------------------------------------------------------------------
    def submit(
        self,
        args: list[str],
        cwd: str | None = None,
        *,
        title: str | None = None,
        meta: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Queues ``tunelab ARGS`` as a job with this shell's environment and directory.

        The default title shows the arguments with their secrets redacted
        (:func:`tuner.redact.redact_argv`); the service checks that again.
        """
        body = {
            "argv": tunelab_argv(args),
            "title": title or one_line("tunelab " + " ".join(redact_argv(args)), CLIENT_TITLE),
            "cwd": cwd or os.getcwd(),
            "env": dict(os.environ),
            "meta": meta or {},
        }
        job: dict[str, Any] = self._call("POST", "/jobs", json_body=body).json()  # the queued job
        return job

    def jobs(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self._call("GET", "/jobs").json()  # one table per job
        return jobs

    def recorded_jobs(self) -> list[dict[str, Any]]:
        """Every job this user has, oldest first; [] without starting a service when none
        was ever recorded (a service that ended itself while idle reloads the table)."""
        if not self.running() and not (paths.jobs_dir() / "jobs.json").exists():
            return []
        return sorted(self.jobs(), key=lambda j: j["submitted"])

    def job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._call("GET", self._job_url(job_id)).json()
        return job

    def stop(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self._call("POST", self._job_url(job_id, "/stop")).json()
        return job

    def log(self, job_id: str, offset: int = 0) -> LogChunk:
        response = self._call("GET", self._job_url(job_id, "/log"), params={"offset": offset})
        return LogChunk(
            response.text,
            int(response.headers["X-Next-Offset"]),
            response.headers["X-Job-State"],
        )

    def events(self, job_id: str, offset: int = 0) -> EventChunk:
        """The trial events the job wrote from ``offset`` on (tuner.trials.event_codec)."""
        url = self._job_url(job_id, "/events")
        data = self._call("GET", url, params={"offset": offset}).json()
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


def _error_text(response: Reply) -> str:
    """The ``error`` of a JSON refusal, else the body as text."""
    try:
        data = json_loads(response.content, what="service answer")
    except ValueError:
        return response.text
    return str(data.get("error", data)) if isinstance(data, dict) else response.text
