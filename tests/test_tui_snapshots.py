"""Snapshot tests of the main screens at 80×24 and 160×48 (pytest-textual-snapshot).

Deterministic by construction: a fixed node name, a recorded introspection
answer, no clock on screen, and telemetry from the FAKE amdsmi module sampled
once (0.01 Hz), so the sparklines hold exactly one point. Update the SVGs
with ``pytest tests/test_tui_snapshots.py --snapshot-update`` after a
deliberate change, and look at them before committing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.widgets.knob_panel import KnobPanel

SIZES = [(80, 24), (160, 48)]


@pytest.fixture(autouse=True)
def fixed_host_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-GPU host-load line reads psutil: fixed readings keep the snapshots stable."""
    from types import SimpleNamespace

    from tui.widgets import gpu_panel

    gib = 1024**3
    monkeypatch.setattr(gpu_panel.psutil, "cpu_percent", lambda *_a, **_k: 37.0)
    monkeypatch.setattr(gpu_panel.psutil, "cpu_count", lambda *_a, **_k: 2)
    monkeypatch.setattr(
        gpu_panel.psutil,
        "virtual_memory",
        lambda: SimpleNamespace(total=16 * gib, available=11 * gib),
    )
    monkeypatch.setattr(gpu_panel.EngineLoad, "sample", lambda self: self)


async def _settled(pilot: Any) -> None:
    await settle(pilot)
    app = pilot.app
    if app.session.gpu_count:
        await wait_for(
            pilot, lambda: app.sampler is not None and app.sampler.ticks >= 1, what="first sample"
        )
        await wait_for(pilot, lambda: app._last_tick is not None, what="first paint of the GPUs")
        await wait_for(pilot, lambda: app.session.model_info is not None, what="model analysis")
    await pilot.pause(0.3)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen_without_gpu(snap_compare: Any, size: tuple[int, int]) -> None:
    app = TunelabApp(services=services())
    assert snap_compare(app, terminal_size=size, run_before=_settled)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen_with_eight_fake_gpus(snap_compare: Any, size: tuple[int, int]) -> None:
    app = TunelabApp(model="tunelab:demo", services=services(gpus=True, rate_hz=0.01))
    assert snap_compare(app, terminal_size=size, run_before=_settled)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen_with_an_error_finding(snap_compare: Any, size: tuple[int, int]) -> None:
    async def make_error(pilot: Any) -> None:
        await _settled(pilot)
        panel = pilot.app.main.query_one(KnobPanel)
        panel.row("max-num-batched-tokens").control.value = "512"
        panel.row("enable-chunked-prefill").control.value = "off"
        panel.row("enforce-eager").control.focus()
        await pilot.pause(0.3)

    app = TunelabApp(services=services())
    assert snap_compare(app, terminal_size=size, run_before=make_error)
