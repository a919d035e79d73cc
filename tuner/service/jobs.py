"""The service's job table: queued, running and ended ``tunelab`` commands, kept on disk.

A job is a detached process (``tuner.service.runjob`` around a tunelab
command) in its own session with its output in a log file, so neither a
terminal hang-up nor the death of the service ends it. The table is saved
(atomically, mode 0600) after every change; a restarted service reloads it
and re-adopts a running job, or learns how it ended from the status file the
wrapper wrote. One job runs at a time by default: each study already uses
every GPU slot, and two studies sharing GPUs would measure each other.

What the table keeps is kept no longer than needed (issue 26): a job's
environment (the submitting shell's, tokens included) only while it waits,
its argv redacted (:func:`tuner.redact.redact_argv`) once it runs. Nothing
in a table read from disk is trusted: rows are type-checked, and a recorded
pid is signalled only once it is proven to be this job's own wrapper (same
user, the recorded start time, the wrapper's command line naming this job's
status file), as the store's recovery proves an engine
(:func:`tuner.engine.proctree.proven_engine`). A pid that is not proven is
left alone and its job settled as lost, with a note.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import psutil

from tuner import bounded, foreign_text
from tuner.redact import redact_argv
from tuner.service.paths import open_private
from tuner.trials.event_codec import EVENTS_ENV

STOP_TERM_AFTER = 30.0  # seconds after SIGINT before SIGTERM
STOP_KILL_AFTER = 60.0  # seconds after SIGINT before SIGKILL of the whole group
WRAPPER_MODULE = "tuner.service.runjob"
MAX_TABLE_BYTES = 64 * bounded.MIB
MAX_TITLE_SHOWN = 300  # characters of a title kept for lists (the rest becomes "…")
_JOB_ID = re.compile(r"[0-9a-f]{1,32}")
_ENDED = "ended"  # the proof's answer for a process that is simply gone
_NOT_PROVEN = "is not provably this job's"


def one_line(text: object, limit: int = MAX_TITLE_SHOWN) -> str:
    """``text`` as one line safe to show: what a list may hold of a title or a note.

    :func:`tuner.foreign_text.one_line` (no escape sequences or control
    characters, invisible ones made visible, line breaks as spaces), cut at
    ``limit`` characters.
    """
    line = foreign_text.one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def safe_title(title: str | None, argv: list[str]) -> str:
    """The title a job is listed and logged under: never a secret of its argv.

    Without a title it is the argv through :func:`~tuner.redact.redact_argv`. A
    given title that holds any secret the redaction took out of the argv (a
    client that built it from the raw argv) is replaced by that redacted argv too.
    """
    shown = redact_argv(argv)
    if not title or any(secret in title for secret in _secrets(argv, shown)):
        title = " ".join(shown)
    return one_line(title)


def _secrets(argv: list[str], shown: list[str]) -> list[str]:
    """What :func:`redact_argv` hid: the changed part of each changed item (``SECRET`` of
    ``--api-key=SECRET``), or each item it dropped when the lengths differ."""
    if len(argv) != len(shown):
        kept = set(shown)
        return [item for item in argv if item and item not in kept]
    found = []
    for item, red in zip(argv, shown, strict=True):
        if item == red:
            continue
        start = _common_length(item, red)
        end = _common_length(item[start:][::-1], red[start:][::-1])
        found.append(item[start : len(item) - end] or item)
    return found


def _common_length(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


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
        """What clients see: no environment, the argv redacted, title and note one clean line."""
        data = asdict(self)
        data.pop("env")
        data["state"] = str(self.state)
        data["argv"] = redact_argv(self.argv)
        data["title"] = one_line(self.title)
        data["note"] = one_line(self.note, 1000)
        return data

    def row(self) -> dict[str, object]:
        """What jobs.json keeps: the environment only while the job waits to start."""
        data = asdict(self) | {"state": str(self.state)}
        if self.state is not JobState.QUEUED:
            data["env"] = {}
        return data

    def scrub(self) -> bool:
        """Drops what a job that left the queue no longer needs; True when anything went.

        Its environment (it may hold tokens) and the secret values in its argv.
        """
        if self.state is JobState.QUEUED:
            return False
        argv = redact_argv(self.argv)
        changed = bool(self.env) or argv != self.argv
        self.env, self.argv = {}, argv
        return changed

    @classmethod
    def from_dict(cls, data: object) -> Job:
        """A job from a jobs.json row, every field type-checked.

        Raises:
            ValueError: the row is not a job this service wrote (the message says why).
        """
        if not isinstance(data, dict):
            raise ValueError("a row is not an object")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for f in fields(cls):
            if f.name in known:
                _check_field(f.name, known[f.name])
        if not _JOB_ID.fullmatch(str(known.get("id", ""))):
            raise ValueError(f"job id {str(known.get('id'))[:40]!r} is not a short hex id")
        for name in ("argv", "title", "cwd", "env"):
            if name not in known:
                raise ValueError(f"job {known['id']} has no {name}")
        known["state"] = JobState(known.get("state", "lost"))
        return cls(**known)


_STRINGS = ("id", "title", "cwd", "note")
_NUMBERS = ("submitted", "started", "ended", "pid_created", "stop_requested")
_INTS = ("returncode", "pid")
_INT_LIMIT = 2**31


def _check_field(name: str, value: Any) -> None:
    """Raises ValueError unless ``value`` has the type the field ``name`` holds."""
    ok: bool
    if name in _STRINGS:
        ok = isinstance(value, str)
    elif name == "state":
        ok = isinstance(value, str) and value in set(JobState)
    elif name == "argv":
        ok = isinstance(value, list) and all(isinstance(a, str) for a in value)
    elif name in ("env", "meta"):
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    elif name in _NUMBERS:
        ok = (value is None and name != "submitted") or (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        )
    else:  # _INTS: a pid is positive; both fit a C int (what the kernel hands out)
        ok = value is None or (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (0 if name == "pid" else -_INT_LIMIT) < value < _INT_LIMIT
        )
    if not ok:
        raise ValueError(f"field {name!r} holds {type(value).__name__} {str(value)[:40]!r}")


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
        """Reads the table; running jobs are re-adopted when proven ours, else settled.

        Rows that are not jobs are dropped (the file is kept aside first, so nothing
        is lost); what ended jobs should no longer hold is scrubbed and saved.
        """
        rows = self._read_rows()
        self.jobs, bad = {}, []
        for row in rows:
            try:
                job = Job.from_dict(row)
            except ValueError as exc:
                bad.append(str(exc))
                continue
            self.jobs[job.id] = job
        if bad:
            self._keep_aside(f"{len(bad)} row(s) are not jobs, e.g. {bad[0]}")
        changed = bool(bad)
        for job in self.jobs.values():
            if job.state is JobState.RUNNING:
                why = self._proof(job)
                if why is not None:
                    self._settle(job, self._lost_note(job, why, "the service was restarted"))
                    changed = True
            changed = job.scrub() or changed
        if changed:
            self.save()

    def _read_rows(self) -> list[object]:
        """The rows of jobs.json ([] when there is none; an unreadable file is kept aside)."""
        try:
            text = bounded.read_text(self.table_path, max_bytes=MAX_TABLE_BYTES, what="job table")
            rows = bounded.loads(text, what="job table")
            if not isinstance(rows, list):
                raise ValueError("the job table is not a list")
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            self._keep_aside(f"unreadable ({exc})")
            return []
        return rows

    def _keep_aside(self, why: str) -> None:
        broken = self.table_path.with_suffix(f".broken-{int(time.time())}")
        with contextlib.suppress(OSError):
            os.replace(self.table_path, broken)
        print(f"[tunelab service] job table {one_line(why, 200)}; kept as {broken}", flush=True)

    def save(self) -> None:
        """Whole-file replace, 0600 (a queued job's environment is in it)."""
        tmp = self.table_path.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)  # a file left over must not lend its mode to the table
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC | os.O_EXCL)
        with os.fdopen(fd, "w") as out:
            os.fchmod(out.fileno(), 0o600)
            json.dump([j.row() for j in self.jobs.values()], out)
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
            job.scrub()
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
            why = self._proof(job)
            if why is not None:
                self._settle(job, self._lost_note(job, why, ""))
                changed = True
            elif job.stop_requested is not None:
                waited = time.time() - job.stop_requested
                if waited > STOP_KILL_AFTER:
                    changed = not self._signal(job, signal.SIGKILL) or changed
                elif waited > STOP_TERM_AFTER:
                    changed = not self._signal(job, signal.SIGTERM) or changed
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

    def _wrapper_argv(self, job: Job) -> list[str]:
        """The command that runs a job: the wrapper, told this job's status file."""
        status = str(self.status_path(job))
        return [sys.executable, "-m", WRAPPER_MODULE, "--rc", status, "--", *job.argv]

    def _start(self, job: Job) -> None:
        """Starts the job's wrapper in its own session; its environment leaves the table."""
        self.status_path(job).unlink(missing_ok=True)
        fd = open_private(self.log_path(job), os.O_WRONLY | os.O_APPEND)
        with os.fdopen(fd, "ab") as log:
            log.write(f"[tunelab] job {job.id}: {one_line(job.title)}\n".encode(errors="replace"))
            log.flush()
            try:
                proc = subprocess.Popen(
                    self._wrapper_argv(job),
                    cwd=job.cwd,
                    env={**job.env, EVENTS_ENV: str(self.events_path(job))},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                job.state, job.ended = JobState.FAILED, time.time()
                job.note = f"could not start: {exc}"
                job.scrub()
                return
        self._procs[job.id] = proc
        job.state, job.started, job.pid = JobState.RUNNING, time.time(), proc.pid
        job.scrub()
        with contextlib.suppress(psutil.Error):
            job.pid_created = psutil.Process(proc.pid).create_time()

    def _proof(self, job: Job) -> str | None:
        """None when the job's process is provably its running wrapper; else why not.

        A child of this service is proven by its Popen (its pid cannot be reused
        before it is reaped). A pid read from the table must still be alive with the
        recorded start time, run as this user, and run the wrapper's command line for
        this job's status file. :data:`_ENDED` means simply gone.
        """
        proc = self._procs.get(job.id)
        if proc is not None:
            return None if proc.poll() is None else _ENDED
        if job.pid is None or job.pid_created is None:
            return "no pid and start time were recorded"
        try:
            found = psutil.Process(job.pid)
            if abs(found.create_time() - job.pid_created) > 0.01:
                return _ENDED  # the pid now belongs to a newer process
            if found.status() == psutil.STATUS_ZOMBIE:
                return _ENDED
            uids = found.uids()
            command = found.cmdline()
        except psutil.NoSuchProcess:
            return _ENDED
        except psutil.Error as exc:
            return f"it cannot be inspected ({type(exc).__name__})"
        if uids.real != os.getuid() or uids.effective != os.getuid():
            return f"it runs as uid {uids.real}, not as this user"
        expected = self._wrapper_argv(job)
        if command[1:5] != expected[1:5]:
            return "its command line is not this job's wrapper"
        return None

    def _lost_note(self, job: Job, why: str, context: str) -> str:
        """The note of a job whose process is gone or not provably its own."""
        if why == _ENDED:
            return f"{context} while it ran" if context else ""
        process = f"its recorded process {job.pid}" if job.pid else "its process (none recorded)"
        return f"{process} {_NOT_PROVEN} ({why}); not signalled"

    def _settle(self, job: Job, note: str) -> None:
        """Ends the job's record: how it ended from the wrapper's status file, else lost.

        ``note`` says why when the status file does not (a restart); a note that the
        process was not proven is kept whatever the file says.
        """
        proc = self._procs.pop(job.id, None)
        if proc is not None:
            proc.poll()  # reaps it, so it does not linger as a zombie
        job.ended = time.time()
        try:
            raw = bounded.read_text(self.status_path(job), max_bytes=4096, what="job status")
            job.returncode = int(bounded.loads(raw, what="job status")["returncode"])
        except (OSError, ValueError, KeyError, TypeError, OverflowError):
            job.state = JobState.LOST
            job.note = note or "the job's process ended without reporting its status"
            return
        if job.returncode == 0:
            job.state = JobState.FINISHED
        elif job.stop_requested is not None:
            job.state, job.note = JobState.STOPPED, "stopped on request"
        else:
            job.state = JobState.FAILED
        if _NOT_PROVEN in note:
            job.note = note

    def _signal(self, job: Job, sig: int) -> bool:
        """To the job's whole process group (its session): the wrapper and the command.

        Only a proven wrapper that still leads its own process group is signalled;
        a job whose process is not proven is settled instead. Returns whether the job
        is still running.
        """
        why = self._proof(job)
        if why is None and job.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(job.pid) == job.pid:
                    os.killpg(job.pid, sig)
                    return True
                why = "it does not lead its own process group"
        self._settle(job, self._lost_note(job, why or _ENDED, ""))
        return False
