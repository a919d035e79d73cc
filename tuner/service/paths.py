"""Where the service's socket, lock, job table and job logs live.

The socket and lock go to the user's runtime directory (``$XDG_RUNTIME_DIR``,
private to the user and cleared at logout) when there is one, else beside the
data; ``TUNELAB_HOME`` moves everything (tests). A Unix socket path must stay
under 108 bytes, so a path that would be longer falls back to a short one in
the temporary directory, named by the user id.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import platformdirs

from tuner import paths

_MAX_SOCKET_PATH = 100


def runtime_dir() -> Path:
    """The directory of the socket and the lock (created 0700)."""
    home = os.environ.get("TUNELAB_HOME")
    if home:
        path = Path(home) / "run"
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(platformdirs.user_runtime_dir(paths.APP))
    else:
        path = paths.data_dir() / "run"
    if len(str(path / "service.sock")) > _MAX_SOCKET_PATH:
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
        path = Path(tempfile.gettempdir()) / f"tunelab-{os.getuid()}-{digest}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def socket_path() -> Path:
    return runtime_dir() / "service.sock"


def lock_path() -> Path:
    return runtime_dir() / "service.lock"


def jobs_dir() -> Path:
    """The job table (jobs.json) and one log file per job; kept across restarts."""
    path = paths.data_dir() / "jobs"
    path.mkdir(parents=True, exist_ok=True)
    return path
