"""The project's layering contracts, checked by import-linter on every run.

- tuner/ (the core) never imports Textual or tui/;
- neither tuner/ nor tui/ imports torch, vllm or transformers in-process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(exe)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
