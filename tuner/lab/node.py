"""The node a tunelab process measures on: its GPU telemetry, opened once for every face.

A trial's power, VRAM and GFX window, its tokens per joule and its "GPU samples
clean" note come from a running sampler handed to the trial runner. The TUI
always had one; the CLI's ``run``, ``ab``, ``sweep``, ``tune``, ``capacity``,
``ablate``, ``presets verify`` and the study service's jobs (the TUI's ``a``)
ran without, so the A/B — the main use — lost its energy figures and its
contamination check (issue 28). Every face now opens the node's telemetry
here. Without a GPU (or with telemetry off) it yields None and nothing
changes; a telemetry library that fails never stops a trial (nvitop's rule:
a missing metric is a value, never a crash).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tuner.telemetry import Backend, Sampler, select_backend
from tuner.trials.slots import parse_gpu_list

if TYPE_CHECKING:
    from tuner.studies.executor import TrialRunner

# `TUNELAB_TELEMETRY=none` turns it off (amd / nvidia pick one; auto is the default).
TELEMETRY_ENV = "TUNELAB_TELEMETRY"
RATE_HZ = 2.0
# The window of a measured run must lie inside the ring buffer (tuner.trials.session):
# an hour of samples at 2 Hz is 7,200 small records per GPU.
SPAN_S = 3600.0


def history_for(rate_hz: float = RATE_HZ, span_s: float = SPAN_S) -> int:
    """Samples per GPU the ring buffer keeps so a measured run of ``span_s`` fits whole."""
    return max(1, int(rate_hz * span_s))


def _open_backend() -> Backend:
    choice = os.environ.get(TELEMETRY_ENV, "auto").strip().lower() or "auto"
    try:
        return select_backend(choice)
    except ValueError:  # an unknown choice: the node is measured as it would be by default
        return select_backend("auto")


# Replaced by tests with a recorded-response backend (tests/fakes): the one boundary
# that cannot exist on a machine without GPUs.
open_backend: Callable[[], Backend] = _open_backend


@contextmanager
def telemetry(rate_hz: float = RATE_HZ) -> Iterator[Sampler | None]:
    """A running sampler of the node's GPUs for the life of the block; None without GPUs.

    The backend is opened and closed here; the sampler samples in its own
    thread, so the trials' event loop never waits on a GPU driver.
    """
    backend = open_backend()
    sampler: Sampler | None = None
    try:
        try:
            if backend.count() > 0:
                sampler = Sampler(backend, rate_hz=rate_hz, history=history_for(rate_hz))
                sampler.start()
        except Exception:  # a driver that fails here measures nothing; the trials still run
            sampler = None
        yield sampler
    finally:
        if sampler is not None:
            sampler.stop()
        with contextlib.suppress(Exception):
            backend.close()


def use_gpus(runner: TrialRunner, gpus: str | None) -> None:
    """Restricts ``runner`` to the GPU ids in ``gpus`` (``--gpus 0,1``; None: all visible) and
    finds the node's GPUs now, so a bad list is refused before any trial starts.

    Raises:
        SlotError: (a TunelabError, exit 2) an id that is not a GPU of this node, or bad text.
    """
    runner.gpus = parse_gpu_list(gpus) if gpus is not None else None
    runner.pool  # noqa: B018 - resolves (and checks) the GPU list before any trial starts
