"""Rows of the trial store that cannot be read: named, never allowed to hide the others.

The columns of a trial row and the conversion both ways live here; the store
(:mod:`tuner.trials.store`) keeps the database. Issue 19: one row with bad JSON,
a status this tunelab does not know or a broken config made the whole store
unreadable; issue 26: a row nested 10^5 levels deep, or with a field of the wrong
type, raised inside every read command. The store now reads row by
row (``TrialStore.scan``): good rows become trials, bad rows become
:class:`BadRow` (id + reason) that the CLI names. Fields a newer tunelab
adds inside the workload or config JSON are dropped on read
(:func:`known_keys`), so an older tunelab still reads what it knows.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from tuner import bounded
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.errors import TunelabError
from tuner.trials.model import Trial, TrialStatus

# Nested fields stored as JSON text.
JSON_FIELDS = (
    "config",
    "workload",
    "findings",
    "results",
    "server",
    "telemetry",
    "gpu_names",
    "tags",
    "timings",
    "effective",
    "guard",
    "environment",
    "untuned",
    "profile",
    "prediction",
)
# Scalar fields stored as plain columns (status as its string value).
SCALAR_FIELDS = (
    "study",
    "objective",
    "status",
    "backend_requested",
    "backend_actual",
    "backend_inferred",
    "startup_seconds",
    "vllm_version",
    "platform",
    "gpu_slot",
    "log_path",
    "failure_reason",
    "created_at",
    "started_at",
    "finished_at",
    "arm",
    "repeat",
    "engine_pid",
    "engine_created",
    "engine_token",
    "owner_pid",
    "owner_created",
)


class UnreadableRow(TunelabError):
    """One stored row does not parse (raised inside the store, reported as a BadRow)."""

    def __init__(self, trial_id: str, reason: str) -> None:
        super().__init__(f"trial {trial_id}: {reason}")
        self.trial_id = trial_id
        self.reason = reason


@dataclass(frozen=True)
class BadRow:
    """A stored row that could not be read: its id and why (shown, never hidden)."""

    id: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True)
class StoreScan:
    """The readable trials of a query and the rows that were not."""

    trials: list[Trial]
    bad: list[BadRow]


def known_keys(value: Any, cls: type, what: str) -> Any:
    """``value`` without the keys dataclass ``cls`` lacks (fields a newer tunelab wrote)."""
    if not isinstance(value, dict):
        raise UnreadableRow("?", f"{what} is not a JSON object")
    known = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in value.items() if k in known}


def one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _json(value: Any) -> str:
    return json.dumps(value, default=_json_default, allow_nan=True, sort_keys=False)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, set | tuple | frozenset):
        return list(value)
    return str(value)


def row_values(trial: Trial) -> dict[str, Any]:
    """The column values of ``trial`` (JSON fields as text; bools as 0/1)."""
    data = trial.to_dict()
    out: dict[str, Any] = {"id": trial.id, "config_id": trial.config_id}
    for name in SCALAR_FIELDS:
        value = data[name]
        out[name] = int(value) if isinstance(value, bool) else value
    for name in JSON_FIELDS:
        value = data[name]
        out[name] = None if value is None else _json(value)
    return out


def trial_from_row(row: sqlite3.Row) -> Trial:
    """The trial of one row.

    Keys a newer tunelab may add inside the workload or config JSON are
    dropped (an older tunelab reads what it knows); anything else that
    does not parse raises :class:`UnreadableRow`.
    """
    try:
        data: dict[str, Any] = {"id": row["id"]}
        for name in SCALAR_FIELDS:
            data[name] = row[name]
        data["backend_inferred"] = bool(data["backend_inferred"])
        for name in JSON_FIELDS:
            raw = row[name]
            # Depth-limited: a row nested 10^5 levels deep must not raise RecursionError.
            data[name] = None if raw is None else bounded.loads(raw, what=f"{name} column")
        for name in ("findings", "gpu_names"):
            data[name] = data[name] or []
        for name in ("tags", "timings"):
            data[name] = data[name] or {}
        if data["status"] not in TrialStatus.__members__.values():
            raise UnreadableRow(
                str(row["id"]), f"unknown status {data['status']!r} (from a newer tunelab?)"
            )
        data["workload"] = known_keys(data["workload"], Workload, "workload")
        data["config"] = known_keys(data["config"], EngineConfig, "config")
        return Trial.from_dict(data)
    except UnreadableRow as exc:
        raise UnreadableRow(str(row["id"]), exc.reason) from None
    except json.JSONDecodeError as exc:
        raise UnreadableRow(str(row["id"]), f"bad JSON ({exc.msg})") from None
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        # ValueError includes ShapeError (a field of the wrong type, tuner.trials.shapes),
        # InputTooLargeError (nested too deep) and UnicodeDecodeError (a BLOB column).
        raise UnreadableRow(str(row["id"]), one_line(str(exc)) or type(exc).__name__) from None
