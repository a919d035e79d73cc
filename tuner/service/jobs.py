"""The service's job table: queued, running and ended ``tunelab`` commands, kept on disk.

A job is a detached process (``tuner.service.runjob`` around a tunelab
command) in its own session with its output in a log file, so neither a
terminal hang-up nor the death of the service ends it. The table is saved
(atomically, mode 0600: it holds the job's environment) after every change;
a restarted service reloads it and re-adopts a running job by its pid and
start time, or learns how it ended from the status file the wrapper wrote.
One job runs at a time by default: each study already uses every GPU slot,
and two studies sharing GPUs would measure each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

import psutil

from tuner.trials.event_codec import EVENTS_ENV

STOP_TERM_AFTER = 30.0  # seconds after SIGINT before SIGTERM
STOP_KILL_AFTER = 60.0  # seconds after SIGINT before SIGKILL of the whole group


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    LOST = "lost"

    @property
    def ended(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)


@dataclass
class Job:
    """One submitted command and what became of it.

    Attributes:
        id: Short random hex id (clients accept any unique prefix).
        argv: The full command line the wrapper runs.
        title: What users read in lists (the tunelab command, without the interpreter).
        cwd: Working directory of the command.
        env: Its environment (the submitting shell's): kept for a queued job.
        state: Where it is.
        pid: The wrapper's pid once started; its start time proves it after a restart.
        note: Why a job ended as it did when the return code alone does not say.
        meta: What the submitting client wants to find the job by again (the TUI: its
            study, store and the kind of work), echoed back in every listing.
    """

    id: str
    argv: list[str]
    title: str
    cwd: str
    env: dict[str, str] = field(repr=False)
    state: JobState = JobState.QUEUED
    submitted: float = field(default_factory=time.time)
    started: float | None = None
    ended: float | None = None
    returncode: int | None = None
    pid: int | None = None
    pid_created: float | None = None
    stop_requested: float | None = None
    note: str = ""
    meta: dict[str, str] = field(default_factory=dict)

    def public(self) -> dict[str, object]:
        """What clients see (not the environment: it may hold tokens)."""
        data = asdict(self)
        data.pop("env")
        data["state"] = str(self.state)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Job:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["state"] = JobState(str(known.get("state", "lost")))
        return cls(**known)  # type: ignore[arg-type]


class JobTable:
    """The jobs of this user, their processes, and the queue's policy."""

    def __init__(self, folder: Path, max_running: int = 1) -> None:
        self.folder = folder
        self.max_running = max_running
        self.jobs: dict[str, Job] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.load()

    # -- files ----------------------------------------------------------------------
    @property
    def table_path(self) -> Path:
        return self.folder / "jobs.json"

    def log_path(self, job: Job) -> Path:
        return self.folder / f"{job.id}.log"

    def status_path(self, job: Job) -> Path:
        return self.folder / f"{job.id}.status.json"

    def events_path(self, job: Job) -> Path:
        """The trial events a study command writes (tuner.trials.event_codec), for the TUI."""
        return self.folder / f"{job.id}.events.jsonl"

    def load(self) -> None:
        """Reads the table; running jobs are re-adopted or settled (the service restarted)."""
        try:
            rows = json.loads(self.table_path.read_text())
        except FileNotFoundError:
            rows = []
        except (OSError, ValueError) as exc:
            broken = self.table_path.with_suffix(f".broken-{int(time.time())}")
            with contextlib.suppress(OSError):
                os.replace(self.table_path, broken)
            print(f"[tunelab service] job table unreadable ({exc}); kept as {broken}", flush=True)
            rows = []
        self.jobs = {row["id"]: Job.from_dict(row) for row in rows}
        for job in self.jobs.values():
            if job.state is JobState.RUNNING and not self._alive(job):
                self._settle(job, "the service was restarted while it ran")

    def save(self) -> None:
        """Whole-file replace, 0600 (the table holds the jobs' environments)."""
        tmp = self.table_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump([asdict(j) | {"state": str(j.state)} for j in self.jobs.values()], out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.table_path)

    # -- requests -------------------------------------------------------------------
    def submit(
        self,
        argv: list[str],
        title: str,
        cwd: str,
        env: dict[str, str],
        meta: dict[str, str] | None = None,
    ) -> Job:
        job = Job(
            id=secrets.token_hex(4), argv=argv, title=title, cwd=cwd, env=env, meta=meta or {}
        )
        self.jobs[job.id] = job
        self.save()
        self.pump()
        return job

    def find(self, prefix: str) -> Job | None:
        """The job whose id starts with ``prefix``, when exactly one does."""
        matches = [j for j in self.jobs.values() if j.id.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def stop(self, job: Job) -> Job:
        """A queued job is dropped; a running one gets Ctrl-C (then SIGTERM, SIGKILL)."""
        if job.state is JobState.QUEUED:
            job.state, job.ended, job.note = JobState.STOPPED, time.time(), "stopped before it ran"
        elif job.state is JobState.RUNNING and job.stop_requested is None:
            job.stop_requested = time.time()
            self._signal(job, signal.SIGINT)
        self.save()
        return job

    def busy(self) -> bool:
        return any(not j.state.ended for j in self.jobs.values())

    # -- the loop's work --------------------------------------------------------------
    def pump(self) -> None:
        """Settles ended jobs, escalates slow stops, starts queued jobs (oldest first)."""
        changed = False
        for job in self.jobs.values():
            if job.state is not JobState.RUNNING:
                continue
            if not self._alive(job):
                self._settle(job, "")
                changed = True
            elif job.stop_requested is not None:
                waited = time.time() - job.stop_requested
                if waited > STOP_KILL_AFTER:
                    self._signal(job, signal.SIGKILL)
                elif waited > STOP_TERM_AFTER:
                    self._signal(job, signal.SIGTERM)
        running = sum(j.state is JobState.RUNNING for j in self.jobs.values())
        for job in sorted(self.jobs.values(), key=lambda j: j.submitted):
            if running >= self.max_running:
                break
            if job.state is JobState.QUEUED:
                self._start(job)
                running += 1
                changed = True
        if changed:
            self.save()

    def _start(self, job: Job) -> None:
        status = self.status_path(job)
        status.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "tuner.service.runjob", "--rc", str(status), "--", *job.argv]
        with open(self.log_path(job), "ab") as log:
            log.write(f"[tunelab] job {job.id}: {job.title}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=job.cwd,
                    env={**job.env, EVENTS_ENV: str(self.events_path(job))},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                job.state, job.ended = JobState.FAILED, time.time()
                job.note = f"could not start: {exc}"
                return
        self._procs[job.id] = proc
        job.state, job.started, job.pid = JobState.RUNNING, time.time(), proc.pid
        with contextlib.suppress(psutil.Error):
            job.pid_created = psutil.Process(proc.pid).create_time()

    def _alive(self, job: Job) -> bool:
        proc = self._procs.get(job.id)
        if proc is not None:
            return proc.poll() is None
        if job.pid is None:
            return False
        try:
            found = psutil.Process(job.pid)
            same = job.pid_created is None or abs(found.create_time() - job.pid_created) < 0.01
            return same and found.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def _settle(self, job: Job, why_unknown: str) -> None:
        self._procs.pop(job.id, None)
        job.ended = time.time()
        try:
            job.returncode = int(json.loads(self.status_path(job).read_text())["returncode"])
        except (OSError, ValueError, KeyError, TypeError):
            job.state = JobState.LOST
            job.note = why_unknown or "the job's process ended without reporting its status"
            return
        if job.returncode == 0:
            job.state = JobState.FINISHED
        elif job.stop_requested is not None:
            job.state, job.note = JobState.STOPPED, "stopped on request"
        else:
            job.state = JobState.FAILED

    def _signal(self, job: Job, sig: int) -> None:
        """To the job's whole process group (its session): the wrapper and the command."""
        if job.pid is None or not self._alive(job):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(job.pid, sig)
