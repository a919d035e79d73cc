"""Runs one of tunelab's probe files in the engine's interpreter and reads its JSON answer.

The probes (:mod:`tuner.introspect_probe`, :mod:`tuner.validate_probe`) import vLLM, which the
tunelab process never does: each runs as ``python -c SOURCE`` from the cache folder (no module
of the working directory can shadow vLLM's imports), vLLM's logs turned down, and answers with
one JSON line after its marker on stdout (vLLM may print there too).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner import paths


@dataclass(frozen=True)
class ProbeAnswer:
    """The probe's JSON answer, or why there is none (``error``: timed out or crashed)."""

    data: dict[str, Any] | None
    error: str | None = None


def run_probe(
    python: str, probe: Path, marker: str, timeout: float, stdin: str | None = None
) -> ProbeAnswer:
    """Runs ``probe``'s source with ``python`` and returns the JSON after ``marker``."""
    env = dict(os.environ)
    env.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    try:
        proc = subprocess.run(
            [python, "-c", probe.read_text()],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=paths.cache_dir(),
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ProbeAnswer(None, f"did not finish within {timeout:.0f} s")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(marker):
            return ProbeAnswer(json.loads(line[len(marker) :]))
    tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
    return ProbeAnswer(None, f"crashed (exit {proc.returncode}): {tail}")
