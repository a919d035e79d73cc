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

from tuner.bench.datasets import check_dataset
from tuner.bench.workload import Workload
from tuner.bounded import loads as bounded_loads
from tuner.bounded import read_text
from tuner.config import EngineConfig
from tuner.errors import TunelabError
from tuner.export.files import atomic_write
from tuner.lab.limits import MAX_REPEATS, MAX_STARTUP_TIMEOUT_S, check_count, check_seconds
from tuner.lab.plans import ABPlan

SPEC_VERSION = 1
# Two configs and a workload are a few KiB; a spec larger than this is not the TUI's.
MAX_SPEC_BYTES = 1024 * 1024
_FIX = "start the A/B again from the TUI"


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
        profile: Profile each arm's first launch after its measured run (issue 29);
            a spec without the key (an older tunelab's) reads as False.
    """

    study: str
    store_path: str | None
    a: EngineConfig
    b: EngineConfig
    workload: Workload
    repeats: int
    startup_timeout: float
    profile: bool = False

    kind = "ab"

    def plan(self) -> ABPlan:
        """The A/B the TUI asked for, as :func:`tuner.lab.run.ab` would have run it in-process."""
        return ABPlan(
            self.a, self.b, self.workload, self.study, repeats=self.repeats, profile=self.profile
        )

    def meta(self) -> dict[str, str]:
        """What the service keeps beside the job so a later TUI finds it (tui.detached)."""
        return {
            "kind": self.kind,
            "study": self.study,
            "store": self.store_path or "",
            "repeats": str(self.repeats),
        }

    @staticmethod
    def repeats_of(meta: Any) -> int:
        """The launches per arm a job's meta says (the service's table is input too: a
        value that is not a count within the bounds reads as the default)."""
        text = meta.get("repeats") if isinstance(meta, dict) else None
        try:
            return check_count("repeats", int(str(text)), 1, MAX_REPEATS)
        except (ValueError, TunelabError):
            from tuner.lab.run import AB_REPEATS  # the study stack, only for a bad table

            return AB_REPEATS

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
            "profile": self.profile,
        }

    @classmethod
    def from_dict(cls, data: object) -> ABJobSpec:
        """The spec from its JSON form, every field checked for type and range.

        Raises:
            JobSpecError: not an object, another version or kind, a missing or
                wrong-typed field, repeats or a startup timeout out of range.
            TunelabError: a config or workload the core refuses (its own message).
        """
        if not isinstance(data, dict):
            raise JobSpecError(f"a job spec is a JSON object, not {_json_type(data)}", fix=_FIX)
        if data.get("version") != SPEC_VERSION or data.get("kind") != cls.kind:
            raise JobSpecError(
                f"job spec version {data.get('version')!r} kind {data.get('kind')!r} is not an "
                f"A/B spec of version {SPEC_VERSION}",
                fix="start the A/B again from this tunelab",
            )
        study, store = data.get("study"), data.get("store_path")
        if not isinstance(study, str) or not study.strip():
            raise JobSpecError("the job spec's study must be a non-empty name", fix=_FIX)
        if store is not None and not isinstance(store, str):
            raise JobSpecError("the job spec's store_path must be a path or null", fix=_FIX)
        profile = data.get("profile", False)
        if not isinstance(profile, bool):
            raise JobSpecError("the job spec's profile must be true or false", fix=_FIX)
        return cls(
            study=study,
            store_path=store,
            a=_config(data, "a"),
            b=_config(data, "b"),
            workload=Workload.from_dict(_table(data, "workload")),
            repeats=check_count("repeats", data.get("repeats"), 1, MAX_REPEATS),
            startup_timeout=check_seconds(
                "startup_timeout", data.get("startup_timeout"), 1.0, MAX_STARTUP_TIMEOUT_S
            ),
            profile=profile,
        )

    def write(self, folder: Path) -> Path:
        """Writes the spec (whole or not at all, mode 0600) into ``folder``; returns its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"tui-{self.kind}-{secrets.token_hex(4)}.json"
        return atomic_write(path, json.dumps(self.to_dict()), mode=0o600)


def _json_type(value: object) -> str:
    """What a JSON value is, in JSON's words (``null``, ``array``, ``string``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {list: "an array", str: "a string", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    """The JSON object under ``key`` (a config or the workload), else a JobSpecError."""
    value = data.get(key)
    if not isinstance(value, dict):
        raise JobSpecError(
            f"the job spec's {key!r} must be a JSON object, got {_json_type(value)}", fix=_FIX
        )
    return value


def _config(data: dict[str, Any], key: str) -> EngineConfig:
    """Arm ``key``'s config: ``{"model": str, "env": {str: str}, "engine": {str: value}}``."""
    table = _table(data, key)
    env, engine = table.get("env", {}), table.get("engine", {})
    shaped = (
        set(table) <= {"model", "env", "engine"}
        and isinstance(table.get("model"), str)
        and isinstance(env, dict)
        and all(isinstance(v, str) for v in env.values())
        and isinstance(engine, dict)
    )
    if not shaped:
        raise JobSpecError(
            f"the job spec's config {key!r} is not a tunelab config "
            '({"model": ..., "env": {NAME: text}, "engine": {flag: value}})',
            fix=_FIX,
        )
    return EngineConfig(**table)


def read_spec(path: Path) -> ABJobSpec:
    """The spec in ``path``, checked whole before any engine starts.

    The file is read through tuner.bounded (a regular file of at most
    MAX_SPEC_BYTES, nesting bounded), and a dataset its workload names is read
    and checked now (tuner.bench.datasets.check_dataset), so a bad spec is
    one message and exit 2, never a crash report or a failed engine launch.

    Raises:
        JobSpecError: missing, not JSON, or not a spec this tunelab runs.
        TunelabError: a config, workload or dataset the core refuses.
    """
    try:
        data = bounded_loads(read_text(path, max_bytes=MAX_SPEC_BYTES, what="job spec"))
    except TunelabError as exc:  # not a regular file, too large, nested too deeply
        raise JobSpecError(exc.message, fix=_FIX) from None
    except (OSError, ValueError) as exc:  # missing, unreadable, not UTF-8, not JSON
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise JobSpecError(f"cannot read the job spec {path}: {reason}", fix=_FIX) from None
    try:
        spec = ABJobSpec.from_dict(data)
    except TunelabError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise JobSpecError(f"the job spec {path} does not fit: {exc}", fix=_FIX) from None
    check_dataset(spec.workload)
    return spec
