"""The type checks the suite runs (issue 28): strict on the application layer and its seams,
and the whole project (``mypy tuner tui``) with the project's settings.

``[tool.mypy]`` in pyproject.toml says what is checked: tuner/lab (what both
faces call) and the modules that hand its decisions to the faces. A type error
there is a broken contract between the TUI or the CLI and the core, found
before a user finds it. What they import is read for its types (its own
errors are listed by ``mypy tuner tui``, not here).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _mypy(cache: Path, *paths: str) -> None:
    """Runs mypy with the project's settings on ``paths`` (none: the config's files)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_the_application_layer_and_its_seams_type_check_strictly(tmp_path: Path) -> None:
    _mypy(tmp_path / "cache")


def test_the_whole_project_type_checks(tmp_path: Path) -> None:
    """``mypy tuner tui``: every module of the core and both faces (issue 28: 76 errors at
    stop 34, one of them a real crash: RunPanel.log shadowed Textual's logger)."""
    _mypy(tmp_path / "cache", "tuner", "tui")
