"""Rows of the trial store that cannot be read: named, never allowed to hide the others.

Issue 19: one row with bad JSON, a status this tunelab does not know or a
broken config made the whole store unreadable. The store now reads row by
row (``TrialStore.scan``): good rows become trials, bad rows become
:class:`BadRow` (id + reason) that the CLI names. Fields a newer tunelab
adds inside the workload or config JSON are dropped on read
(:func:`known_keys`), so an older tunelab still reads what it knows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tuner.errors import TunelabError
from tuner.trials.model import Trial


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
