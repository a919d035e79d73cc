"""Trial events as JSON lines: how a detached study tells a TUI that is not its parent.

A study the service runs (``tuner.service``) writes every event its runner
emits, one JSON object per line, to the job's event file; the TUI reads the
file through the service from any offset and posts the decoded events as it
would the events of a study it ran itself. So a TUI that attached after an SSH
drop replays the study's progress and ends on the same final trials. Each
line is ``{"type": <class name>, "at": <wall-clock seconds>, ...fields}``;
trials travel in their store form (:meth:`Trial.to_dict`), findings in theirs.
The time is when the event happened, so a replay shows how long the start
really took, not how fast the replay went.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

from tuner import bounded
from tuner.errors import TunelabError
from tuner.rules.types import Finding
from tuner.trials.events import (
    SlotState,
    StudyStatus,
    TrialBackend,
    TrialDone,
    TrialEvent,
    TrialFailed,
    TrialLog,
    TrialProgress,
    TrialPruned,
    TrialQueued,
    TrialSkipped,
    TrialStage,
)
from tuner.trials.model import Trial

# The job's event file, set by the service for each job it starts.
EVENTS_ENV = "TUNELAB_EVENTS_FILE"

# The wall-clock time the event was written (not a field of any event type).
AT = "at"

_PLAIN = {cls.__name__: cls for cls in (TrialQueued, TrialStage, TrialLog, TrialBackend)}


class EventDecodeError(TunelabError, ValueError):
    """A line is no event this tunelab knows (a newer writer, or a torn file)."""


def encode(event: TrialEvent) -> dict[str, Any]:
    """The event as a JSON-ready dict with its ``type``."""
    name = type(event).__name__
    if isinstance(event, (TrialDone, TrialFailed, TrialPruned)):
        data: dict[str, Any] = {"trial": event.trial.to_dict()}
        if not isinstance(event, TrialDone):
            data["reason"] = event.reason
    elif isinstance(event, TrialSkipped):
        data = {
            "trial": event.trial.to_dict(),
            "findings": [f.to_dict() for f in event.findings],
            "reason": event.reason,
        }
    elif isinstance(event, TrialProgress):
        data = {"trial_id": event.trial_id, "progress": asdict(event.progress)}
    else:
        data = asdict(event)
    return {"type": name, **data}


def decode(data: dict[str, Any]) -> TrialEvent:
    """Inverse of :func:`encode`.

    Raises:
        EventDecodeError: an unknown type or fields that do not fit it.
    """
    fields = dict(data)
    name = fields.pop("type", None)
    fields.pop(AT, None)  # the line's time, not a field of the event
    try:
        if name in _PLAIN:
            return _PLAIN[name](**fields)
        if name == "TrialProgress":
            # Deferred: tuner.bench.progress loads the benchmark's HTTP stack, which the study
            # commands that write events (and the tests that time them) do without.
            from tuner.bench.progress import BenchProgress

            return TrialProgress(fields["trial_id"], BenchProgress(**fields["progress"]))
        if name == "StudyStatus":
            slots = tuple(
                SlotState(**{**slot, "gpus": tuple(slot.get("gpus", ()))})
                for slot in fields.pop("slots")
            )
            return StudyStatus(**fields, slots=slots)
        if name in ("TrialDone", "TrialFailed", "TrialPruned", "TrialSkipped"):
            trial = Trial.from_dict(fields["trial"])
            if name == "TrialDone":
                return TrialDone(trial)
            if name == "TrialSkipped":
                findings = tuple(Finding.from_dict(f) for f in fields["findings"])
                if "reason" not in fields:  # a line written before the reason was carried
                    return TrialSkipped(trial, findings)
                return TrialSkipped(trial, findings, str(fields["reason"]))
            cls = TrialFailed if name == "TrialFailed" else TrialPruned
            return cls(trial, fields["reason"])
    except (TypeError, KeyError, ValueError) as exc:
        raise EventDecodeError(f"a {name} event that does not fit: {exc}") from None
    raise EventDecodeError(f"unknown event type {name!r}")


@dataclass
class EventWriter:
    """Appends events to a file, one flushed line each (a reader never sees half a line's worth
    of a complete event: it reads whole lines only)."""

    out: IO[str]

    @classmethod
    def open(cls, path: Path) -> EventWriter:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return cls(os.fdopen(fd, "a", encoding="utf-8"))

    @classmethod
    def from_env(cls) -> EventWriter | None:
        """The writer for this job's event file, when a service started this process."""
        path = os.environ.get(EVENTS_ENV)
        return cls.open(Path(path)) if path else None

    def __call__(self, event: TrialEvent) -> None:
        line = {**encode(event), AT: round(time.time(), 3)}
        with contextlib.suppress(OSError, ValueError):  # a full disk must not end the study
            self.out.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.out.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.out.close()


def read_lines(path: Path, offset: int, limit: int = 1 << 20) -> tuple[list[dict[str, Any]], int]:
    """The complete lines from ``offset`` (at most ``limit`` bytes), decoded as JSON, and the
    offset after the last of them; a line still being written waits for the next read."""
    try:
        with open(path, "rb") as src:
            src.seek(offset)
            chunk = src.read(limit)
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    rows = []
    for line in chunk[:end].splitlines():
        # Depth-limited (a line nested 10^5 deep raised RecursionError); a line that is
        # not a JSON object is no event: skipped like a torn one (InputTooLargeError
        # and UnicodeDecodeError are ValueErrors too).
        with contextlib.suppress(ValueError):
            row = bounded.loads(line, what="event line")
            if isinstance(row, dict):
                rows.append(row)
    return rows, offset + end


class Stamped(NamedTuple):
    """An event and the wall-clock time it was written (None: a line without one)."""

    event: TrialEvent
    at: float | None


def decode_all(rows: list[dict[str, Any]]) -> Iterator[Stamped]:
    """The events among ``rows``, each with its time; lines this tunelab cannot read are
    skipped, not fatal."""
    for row in rows:
        if not isinstance(row, dict):  # a peer's answer: not every row need be an object
            continue
        with contextlib.suppress(EventDecodeError):
            at = row.get(AT)
            yield Stamped(decode(row), float(at) if isinstance(at, int | float) else None)
