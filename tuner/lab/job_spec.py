"""A TUI study handed to the study service: what to run, written to a file the job reads.

The TUI's ``a`` (A/B of the baseline against the current config) runs as a
service job so it outlives the terminal (issue 18). The job must run exactly
what the TUI would have run in-process (:func:`tuner.lab.run.ab`, the same
configs, workload, study and store), and a workload has more fields than any
command line spells, so the TUI writes them here whole and the job reads them
back (``tunelab jobs run-spec FILE``). ``meta`` is how a later TUI finds the
job again: its kind, study and store.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.errors import TunelabError
from tuner.export.files import atomic_write

SPEC_VERSION = 1


class JobSpecError(TunelabError):
    """The spec file is missing, unreadable or from an incompatible tunelab."""


@dataclass(frozen=True)
class ABJobSpec:
    """An A/B as the TUI asks for it.

    Attributes:
        study: The study its trials and verdict are stored under.
        store_path: The trial store (None: the user's default store).
        a: The baseline config.
        b: The config under test.
        workload: The workload both arms run.
        repeats: Launches per arm.
        startup_timeout: Seconds an engine may take to become healthy.
    """

    study: str
    store_path: str | None
    a: EngineConfig
    b: EngineConfig
    workload: Workload
    repeats: int
    startup_timeout: float

    kind = "ab"

    def meta(self) -> dict[str, str]:
        """What the service keeps beside the job so a later TUI finds it (tui.detached)."""
        return {
            "kind": self.kind,
            "study": self.study,
            "store": self.store_path or "",
            "repeats": str(self.repeats),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SPEC_VERSION,
            "kind": self.kind,
            "study": self.study,
            "store_path": self.store_path,
            "a": self.a.canonical(),
            "b": self.b.canonical(),
            "workload": self.workload.to_dict(),
            "repeats": self.repeats,
            "startup_timeout": self.startup_timeout,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ABJobSpec:
        if data.get("version") != SPEC_VERSION or data.get("kind") != cls.kind:
            raise JobSpecError(
                f"job spec version {data.get('version')!r} kind {data.get('kind')!r} is not an "
                f"A/B spec of version {SPEC_VERSION}",
                fix="start the A/B again from this tunelab",
            )
        return cls(
            study=str(data["study"]),
            store_path=data.get("store_path"),
            a=EngineConfig(**data["a"]),
            b=EngineConfig(**data["b"]),
            workload=Workload.from_dict(data["workload"]),
            repeats=int(data["repeats"]),
            startup_timeout=float(data["startup_timeout"]),
        )

    def write(self, folder: Path) -> Path:
        """Writes the spec (whole or not at all, mode 0600) into ``folder``; returns its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"tui-{self.kind}-{secrets.token_hex(4)}.json"
        return atomic_write(path, json.dumps(self.to_dict()), mode=0o600)


def read_spec(path: Path) -> ABJobSpec:
    """The spec in ``path``.

    Raises:
        JobSpecError: missing, not JSON, or not a spec this tunelab runs.
    """
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise JobSpecError(
            f"cannot read the job spec {path}: {exc}", fix="start the A/B again from the TUI"
        ) from None
    try:
        return ABJobSpec.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise JobSpecError(
            f"the job spec {path} does not fit: {exc}", fix="start the A/B again from the TUI"
        ) from None
