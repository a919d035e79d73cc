"""A throwaway PostgreSQL server for tests: initdb in a temp dir, start, stop.

Uses the Debian PostgreSQL binaries when they are installed (``initdb`` and
``postgres`` on PATH or under /usr/lib/postgresql/*/bin). PostgreSQL refuses
to run as root, so under root the server runs as ``nobody`` via ``runuser``.
Trust authentication on 127.0.0.1 only; ``stop()`` deletes the data dir.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def find_bin(name: str) -> str | None:
    """The PostgreSQL server binary ``name`` (initdb, postgres), or None."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def available() -> str | None:
    """None when a server can be started here, else why not."""
    if not (find_bin("initdb") and find_bin("postgres")):
        return "PostgreSQL server binaries (initdb, postgres) are not installed"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser; PostgreSQL refuses to run as root"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'tunelab[postgres]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """Start with ``start()``, read ``url``, end with ``stop()``."""

    def __init__(self) -> None:
        # Directly under /tmp, not in pytest's tmp tree: pytest keeps that 0700
        # (and re-applies it whenever any pytest session starts), which the
        # unprivileged server user could not enter.
        self.root = Path(tempfile.mkdtemp(prefix="tunelab-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "nobody", "--", *argv] if os.geteuid() == 0 else argv

    @property
    def url(self) -> str:
        return f"postgresql://tunelab@127.0.0.1:{self.port}/postgres"

    def start(self, timeout: float = 60.0) -> PostgresServer:
        if os.geteuid() == 0:
            shutil.chown(self.root, "nobody")
        subprocess.run(
            self._as_owner(
                [
                    find_bin("initdb") or "initdb",
                    "-D",
                    str(self.data),
                    "-A",
                    "trust",
                    "-U",
                    "tunelab",
                ]
            ),
            check=True,
            capture_output=True,
        )
        log = open(self.root / "server.log", "wb")  # noqa: SIM115 - kept for the server's life
        self.proc = subprocess.Popen(
            self._as_owner(
                [
                    find_bin("postgres") or "postgres",
                    "-D",
                    str(self.data),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.root),
                    "-c",
                    "fsync=off",
                ]
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(
                    f"host=127.0.0.1 port={self.port} user=tunelab dbname=postgres"
                ).close()
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "PostgreSQL did not start: "
                        + (self.root / "server.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.2)

    def stop(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().splitlines()[0])
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # fast shutdown
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)
