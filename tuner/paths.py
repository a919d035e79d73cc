"""Where tunelab keeps its files: one place, so tests can redirect it all.

Every directory comes from platformdirs and can be moved wholesale with the
environment variable ``TUNELAB_HOME`` (tests point it at a temporary dir so a
run never touches the user's real cache or store).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "tunelab"


def _home() -> Path | None:
    home = os.environ.get("TUNELAB_HOME")
    return Path(home) if home else None


def cache_dir() -> Path:
    """Regenerable files: the demo model, the introspection cache."""
    home = _home()
    path = home / "cache" if home else Path(platformdirs.user_cache_dir(APP))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """Files that must survive: the trial store, engine logs, studies."""
    home = _home()
    path = home / "data" if home else Path(platformdirs.user_data_dir(APP))
    path.mkdir(parents=True, exist_ok=True)
    return path


def trials_dir() -> Path:
    """One sub-directory per trial: engine log, raw benchmark results."""
    path = data_dir() / "trials"
    path.mkdir(parents=True, exist_ok=True)
    return path


def crash_dir() -> Path:
    """Crash reports of internal errors (one file per crash; see tuner.crash)."""
    path = data_dir() / "crashes"
    path.mkdir(parents=True, exist_ok=True)
    return path


def reports_dir(study: str) -> Path:
    """Where the TUI's ``p`` writes ``study``'s report: tunelab's own data folder, never the
    directory tunelab happened to be started in (``tunelab report --out DIR`` for another)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in study).strip(".") or "study"
    return data_dir() / "reports" / safe
