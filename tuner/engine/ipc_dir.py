"""A private directory for the socket files a vLLM engine makes, removed with the engine.

vLLM's processes talk over ZMQ IPC sockets it creates as
``$VLLM_RPC_BASE_PATH/<uuid4>`` (the system temp dir by default) and does
not remove: measured with vLLM 0.32 on CPU, every engine left 4 to 7
zero-byte socket files in /tmp, stopped cleanly or killed, so a study of a
few hundred trials leaves a thousand. tunelab points each engine it starts
at a fresh ``tunelab-ipc-*`` directory and removes it once the engine's
process tree is gone: on stop (tuner.engine.server), by the reaper when
tunelab itself was killed (tuner.engine.reaper), and by the store's recovery
when the reaper was killed too (tuner.trials.store). A ``VLLM_RPC_BASE_PATH``
the user set is left alone. This is launch plumbing, not a knob: it is
never exported into a preset or launch script.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

IPC_ENV = "VLLM_RPC_BASE_PATH"
PREFIX = "tunelab-ipc-"


def make_ipc_dir() -> Path:
    """A new directory (mode 0700) for one engine's sockets, under the system temp dir."""
    return Path(tempfile.mkdtemp(prefix=PREFIX))


def remove_ipc_dir(path: str | Path | None) -> None:
    """Removes a directory :func:`make_ipc_dir` made (anything else is left alone)."""
    if path is None:
        return
    path = Path(path)
    if path.name.startswith(PREFIX) and path.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(path, ignore_errors=True)
