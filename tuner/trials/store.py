"""The trial store: SQLite that never loses a result, even when tunelab is killed.

One row per trial in ``data_dir()/tunelab.db``. Every state change is its
own committed transaction (WAL journal, ``synchronous=NORMAL``), so a SIGKILL
at any point leaves the last committed state readable. While a trial runs
its row names the engine's root process and the tunelab process that owns
it (pid plus create time, so a reused pid is never mistaken for them);
:meth:`TrialStore.recover` marks trials whose owner is gone as interrupted
and kills what is left of their engine tree. Several tunelab processes can
write to one store at once: writes take SQLite's write lock up front
(``BEGIN IMMEDIATE``) and wait for it (busy timeout) instead of failing.
Scalar fields are columns; nested data (config, workload, findings, results,
telemetry ...) are JSON columns, readable with any SQLite client.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tuner import paths
from tuner.errors import TunelabError
from tuner.trials.export import to_csv, to_json
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.rows import (
    JSON_FIELDS,
    SCALAR_FIELDS,
    BadRow,
    StoreScan,
    UnreadableRow,
    row_values,
    trial_from_row,
)

# 2: the study_settings table (a study's chosen baseline; tuner.lab.study).
# 3: the ``effective`` column (requested vs effective config, tuner.engine.effective).
# 4: the ``engine_token`` column (recovery's proof that it started the engine, issue 19).
# 5: the ``guard`` column (output-drift guard probes, tuner.guard; issue 16).
# 6: the ``environment`` column (the fingerprint each trial ran on; issue 17).
# 7: the ``untuned`` column (AITER kernel shapes that ran untuned; issue 29).
# 8: the ``profile`` column (a torch-profiler window after the measured run; issue 29).
# 9: the ``prediction`` column (the study model's forecast before the run; issue 31).
SCHEMA_VERSION = 9
DB_NAME = "tunelab.db"
BUSY_TIMEOUT_S = 30.0

_TYPES = {
    "backend_inferred": "INTEGER",
    "startup_seconds": "REAL",
    "created_at": "REAL",
    "started_at": "REAL",
    "finished_at": "REAL",
    "repeat": "INTEGER",
    "engine_pid": "INTEGER",
    "engine_created": "REAL",
    "owner_pid": "INTEGER",
    "owner_created": "REAL",
}
_COLUMNS = ("id", "config_id", *SCALAR_FIELDS, *JSON_FIELDS)
# SQL: the row's created_at is a number a clock could give (not text, a blob or inf).
_FINITE_TIME = "typeof(created_at) IN ('integer', 'real') AND abs(created_at) < 1e15"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS trials (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    config_id TEXT NOT NULL,
    {", ".join(f"{name} {_TYPES.get(name, 'TEXT')}" for name in SCALAR_FIELDS)},
    {", ".join(f"{name} TEXT" for name in JSON_FIELDS)},
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS trials_study ON trials(study);
CREATE INDEX IF NOT EXISTS trials_status ON trials(status);
CREATE TABLE IF NOT EXISTS study_settings (
    study TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (study, key)
);
"""


class StoreError(TunelabError, RuntimeError):
    """The store cannot do what was asked; the message says what to do instead."""


class TrialNotFound(StoreError, KeyError):
    """No trial matches an id or prefix (or the prefix is ambiguous)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class StudySummary:
    """One study in the store: how many trials in which state."""

    name: str
    trials: int
    counts: dict[str, int]
    first_at: float
    last_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trials": self.trials,
            "counts": self.counts,
            "first_at": self.first_at,
            "last_at": self.last_at,
        }


def default_path() -> Path:
    """``data_dir()/tunelab.db`` (moved wholesale by TUNELAB_HOME)."""
    return paths.data_dir() / DB_NAME


class TrialStore:
    """The trial database.

    Args:
        path: SQLite file; default ``data_dir()/tunelab.db``.
        timeout: Seconds a writer waits for another process's write lock.

    Raises:
        StoreError: When the file is not a tunelab store or was written by a
            newer tunelab (schema version above this one's).
    """

    def __init__(self, path: str | Path | None = None, *, timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path) if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the store's directory {self.path.parent} "
                f"({exc.strerror or exc}); pass a --store path in a writable directory"
            ) from None
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(
                str(self.path), timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: a commit survives the process being killed at any
            # point (only a power cut may lose the last few); FULL would add an
            # fsync per state change, milliseconds to seconds on a busy disk.
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{self.path} is not a usable tunelab store ({exc}); move it aside or pass another path"
            ) from None

    # -- connection ----------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> TrialStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, holding SQLite's write lock from its start."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this tunelab's "
                f"({SCHEMA_VERSION}); upgrade tunelab or use another store"
            )
        if version == SCHEMA_VERSION:
            return
        with self._write() as conn:
            # Re-read inside the lock: another process may have created it meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
                return
            # executescript() would commit the open transaction: run statements one by one.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            # An older store's trials table lacks the columns added since
            # (version 3: effective; version 4: engine_token; version 5: guard;
            # version 6: environment; version 7: untuned; version 8: profile;
            # version 9: prediction).
            have = {row[1] for row in conn.execute("PRAGMA table_info(trials)")}
            for name in (*SCALAR_FIELDS, *JSON_FIELDS):
                if name not in have:
                    conn.execute(f"ALTER TABLE trials ADD COLUMN {name} {_TYPES.get(name, 'TEXT')}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- writing -----------------------------------------------------------------
    def add(self, trial: Trial) -> Trial:
        """Inserts a new trial (its current state), committed at once.

        Raises:
            StoreError: When a trial with that id is already stored.
        """
        values = row_values(trial)
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        try:
            with self._write() as conn:
                conn.execute(
                    f"INSERT INTO trials ({cols}, updated_at) VALUES ({marks}, ?)",
                    [*values.values(), time.time()],
                )
        except sqlite3.IntegrityError:
            raise StoreError(f"trial {trial.id} is already in the store") from None
        return trial

    def save(self, trial: Trial) -> Trial:
        """Writes every field of ``trial`` (insert or replace), committed at once."""
        values = row_values(trial)
        sets = ", ".join(f"{k} = excluded.{k}" for k in values if k != "id")
        cols = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self._write() as conn:
            conn.execute(
                f"INSERT INTO trials ({cols}, updated_at) VALUES ({marks}, ?) "
                f"ON CONFLICT(id) DO UPDATE SET {sets}, updated_at = excluded.updated_at",
                [*values.values(), time.time()],
            )
        return trial

    def update_status(self, trial: Trial, status: TrialStatus | str, **changes: Any) -> Trial:
        """Moves ``trial`` to ``status`` (and sets any other fields given), in one transaction.

        The in-memory trial is updated too, so callers keep one object.

        Raises:
            StoreError: For a field name Trial does not have.
        """
        status = TrialStatus(status)
        for key in changes:
            if not hasattr(trial, key) or key in ("id", "config", "workload"):
                raise StoreError(f"cannot set {key!r} on a trial")
        trial.status = status
        for key, value in changes.items():
            setattr(trial, key, value)
        if status.final and trial.finished_at is None:
            trial.finished_at = time.time()
        if status.final:
            trial.engine_pid = trial.engine_created = None
            trial.engine_token = None
        self.save(trial)
        return trial

    def save_result(
        self,
        trial: Trial,
        results: dict[str, Any],
        *,
        server: dict[str, Any] | None = None,
        telemetry: dict[str, Any] | None = None,
    ) -> Trial:
        """Records a finished measurement and marks the trial done, in one transaction."""
        return self.update_status(
            trial, TrialStatus.DONE, results=results, server=server, telemetry=telemetry
        )

    def delete(self, trial_id: str) -> None:
        """Removes one trial (by full id)."""
        with self._write() as conn:
            conn.execute("DELETE FROM trials WHERE id = ?", (trial_id,))

    # -- reading -----------------------------------------------------------------
    def get(self, key: str) -> Trial:
        """The trial with id ``key`` or the one whose id starts with ``key``.

        Raises:
            TrialNotFound: No trial matches, or the prefix matches several.
        """
        key = key.strip()
        if not key:
            raise TrialNotFound("no trial id given; `tunelab results` lists them")
        with self._lock:
            row = self._conn.execute("SELECT * FROM trials WHERE id = ?", (key,)).fetchone()
            if row is not None:
                return self._read_one(row)
            pattern = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self._conn.execute(
                "SELECT * FROM trials WHERE id LIKE ? ESCAPE '\\' ORDER BY seq LIMIT 6", (pattern,)
            ).fetchall()
        if not rows:
            raise TrialNotFound(
                f"no trial with id {key!r} in {self.path}; `tunelab results` lists them"
            )
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows[:5])
            raise TrialNotFound(
                f"trial id prefix {key!r} is ambiguous ({ids}...); give more characters"
            )
        return self._read_one(rows[0])

    def _read_one(self, row: sqlite3.Row) -> Trial:
        try:
            return trial_from_row(row)
        except UnreadableRow as exc:
            raise StoreError(
                f"trial {exc.trial_id} in {self.path} cannot be read ({exc.reason}); "
                "`tunelab results` lists the readable ones"
            ) from None

    def list(
        self, study: str | None = None, status: TrialStatus | str | None = None
    ) -> list[Trial]:
        """Trials in the order they were added, optionally of one study and/or status.

        Rows that cannot be read are left out (see :meth:`scan` to name them).
        """
        return self.scan(study, status).trials

    def repeats_of(self, trial: Trial) -> builtins.list[Trial]:
        """The finished launches of ``trial``'s config in its study under the same objective
        (``trial`` itself among them when it finished): what an export pools."""
        return [
            t
            for t in self.list(study=trial.study, status=TrialStatus.DONE)
            if t.config_id == trial.config_id and t.objective == trial.objective
        ]

    def scan(self, study: str | None = None, status: TrialStatus | str | None = None) -> StoreScan:
        """Like :meth:`list`, plus the rows that could not be read and why.

        One bad row (bad JSON, a status this tunelab does not know, a broken
        config) must not hide the others (issue 19): it is named, not raised.
        """
        where, args = [], []
        if study is not None:
            where.append("study = ?")
            args.append(study)
        if status is not None:
            where.append("status = ?")
            args.append(str(TrialStatus(status)))
        sql = (
            "SELECT * FROM trials"
            + (f" WHERE {' AND '.join(where)}" if where else "")
            + " ORDER BY seq"
        )
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        trials: list[Trial] = []
        bad: list[BadRow] = []
        for row in rows:
            try:
                trials.append(trial_from_row(row))
            except UnreadableRow as exc:
                bad.append(BadRow(exc.trial_id, exc.reason))
        return StoreScan(trials, bad)

    def studies(self) -> builtins.list[StudySummary]:
        """Every study with its trial counts per status, oldest first.

        A row whose study is not text or whose time is not a number (a hostile
        or corrupted row, which :meth:`scan` names) gives no study and no time.
        """
        when = f"CASE WHEN {_FINITE_TIME} THEN created_at END"
        with self._lock:
            rows = self._conn.execute(
                f"SELECT study, status, COUNT(*) AS n, MIN({when}) AS first, MAX({when}) AS last "
                "FROM trials WHERE typeof(study) = 'text' GROUP BY study, status"
            ).fetchall()
        grouped: dict[str, dict[str, Any]] = {}
        for r in rows:
            entry = grouped.setdefault(r["study"], {"counts": {}, "first": None, "last": None})
            entry["counts"][str(r["status"])] = r["n"]
            if r["first"] is not None:
                first, last = entry["first"], entry["last"]
                entry["first"] = r["first"] if first is None else min(first, r["first"])
                entry["last"] = r["last"] if last is None else max(last, r["last"])
        for entry in grouped.values():
            entry["first"] = 0.0 if entry["first"] is None else entry["first"]
            entry["last"] = 0.0 if entry["last"] is None else entry["last"]
        out = [
            StudySummary(name, sum(e["counts"].values()), e["counts"], e["first"], e["last"])
            for name, e in grouped.items()
        ]
        return sorted(out, key=lambda s: s.first_at)

    # -- per-study settings --------------------------------------------------------
    def study_setting(self, study: str, key: str) -> str | None:
        """A value kept for ``study`` (e.g. its baseline trial id), None if never set."""
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM study_settings WHERE study = ? AND key = ?", (study, key)
            ).fetchone()
        return None if row is None else str(row["value"])

    def set_study_setting(self, study: str, key: str, value: str | None) -> None:
        """Keeps ``value`` for ``study`` across sessions (None removes it)."""
        with self._write() as conn:
            if value is None:
                conn.execute("DELETE FROM study_settings WHERE study = ? AND key = ?", (study, key))
            else:
                conn.execute(
                    "INSERT INTO study_settings (study, key, value, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(study, key) DO UPDATE SET value = excluded.value, "
                    "updated_at = excluded.updated_at",
                    (study, key, value, time.time()),
                )

    # -- export ------------------------------------------------------------------
    def export_json(self, study: str | None = None) -> str:
        """The trials (of ``study``, or all) as a JSON array."""
        return to_json(self.list(study))

    def export_csv(self, study: str | None = None) -> str:
        """The trials (of ``study``, or all) as CSV, one row per trial."""
        return to_csv(self.list(study))

    # -- crash recovery ----------------------------------------------------------
    def recover(self) -> builtins.list[Trial]:
        """Marks trials left starting/measuring by a dead tunelab as interrupted.

        A trial counts as orphaned when the tunelab process that ran it (pid +
        create time in the row) is gone; trials of live tunelab processes —
        this one or another sharing the store — are left alone. If the
        orphan's engine is still alive (its reaper should have ended it, but
        may itself have been killed), its tree is killed here — but only when
        the row PROVES tunelab started it: pid, create time and the random
        token the runner put into the engine's environment must all match
        (:func:`tuner.engine.proctree.proven_engine`). A store handed over from
        elsewhere, or a forged row, therefore cannot make recovery kill an
        unrelated process (issue 19). Only commands that go on to run trials
        call this; read-only commands never do (``open_store(recover=False)``).

        Returns:
            The trials marked interrupted.
        """
        recovered: list[Trial] = []
        for trial in self.list():
            if not trial.status.active or _process_alive(trial.owner_pid, trial.owner_created):
                continue
            stage = str(trial.status)
            engine_note = self._reap_engine(trial)
            # Re-read under the write lock: another process may have recovered it first.
            with self._write() as conn:
                row = conn.execute("SELECT status FROM trials WHERE id = ?", (trial.id,)).fetchone()
                if row is None or row["status"] != stage:
                    continue
                trial.status = TrialStatus.INTERRUPTED
                trial.failure_reason = (
                    f"tunelab stopped while the trial was {stage} (interrupted){engine_note}"
                )
                trial.finished_at = trial.finished_at or time.time()
                trial.engine_pid = trial.engine_created = None
                trial.engine_token = None
                values = row_values(trial)
                sets = ", ".join(f"{k} = ?" for k in values if k != "id")
                conn.execute(
                    f"UPDATE trials SET {sets}, updated_at = ? WHERE id = ?",
                    [*(v for k, v in values.items() if k != "id"), time.time(), trial.id],
                )
            recovered.append(trial)
        return recovered

    @staticmethod
    def _reap_engine(trial: Trial) -> str:
        """Kills an orphan's engine tree if (and only if) it is provably tunelab's; a note."""
        # Deferred for start-up time: tuner.engine's package imports the server
        # (HTTP clients), which read-only commands never need.
        from tuner.engine import proctree
        from tuner.engine.ipc_dir import IPC_ENV, remove_ipc_dir

        pid = trial.engine_pid
        if not pid or not _process_alive(pid, trial.engine_created):
            return ""
        if not proctree.proven_engine(pid, trial.engine_created, trial.engine_token):
            return (
                f"; pid {pid} named as its engine is running but is not provably an engine "
                "this tunelab started (no matching create time and token), so it was left alone"
            )
        try:  # its socket directory, which the killed reaper would have removed
            ipc_dir = psutil.Process(pid).environ().get(IPC_ENV)
        except psutil.Error:
            ipc_dir = None
        left = proctree.kill_tree(pid, graceful=0.0, term=2.0)
        if not left:
            remove_ipc_dir(ipc_dir)
            return f"; its engine (pid {pid}) was still running and was killed"
        return f"; its engine (pid {pid}) could not be killed: {sorted(r.pid for r in left)}"


def _process_alive(pid: int | None, created: float | None) -> bool:
    """Whether ``pid`` still runs and is the same process (create time matches)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if created is not None and abs(proc.create_time() - created) > 0.01:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def this_process() -> tuple[int, float]:
    """(pid, create time) of the running tunelab process, for the owner columns."""
    pid = os.getpid()
    return pid, psutil.Process(pid).create_time()
