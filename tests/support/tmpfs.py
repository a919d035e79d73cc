"""Real tmpfs mounts for export-fault tests (root only): a full disk or a read-only directory."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mount_tmpfs(path: Path, options: str) -> bool:
    """Mounts a tmpfs with ``options`` on ``path``; False where mounting is not allowed."""
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    return proc.returncode == 0
