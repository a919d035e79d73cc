"""One GPU's telemetry throws or hangs: that GPU shows an error/N/A, the others and the UI go on.

``tests/test_telemetry_sampler.py`` proves the sampler isolates a bad GPU;
this checks the whole path a user sees: the real TUI on the amdsmi backend
over the FAKE amdsmi module (``tests/fakes``, the library boundary that
cannot exist without a GPU), where GPU 5 answers every call with DRM_ERROR
(as recorded) and GPU 3's driver calls block forever once the app runs. The
app must keep refreshing the healthy GPUs, keep answering keys, and quit
promptly even though a driver thread is stuck.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from tests.support.tui_harness import services, wait_for
from tui.app import TunelabApp
from tui.widgets.gpu_panel import GpuPanel


def _hanging_backend(gate: threading.Event, holder: dict[str, Any]) -> Any:
    from tests.fakes import fake_amdsmi
    from tuner.telemetry.amd import AmdSmiBackend

    module = fake_amdsmi.make_module("mi355x")
    backend = AmdSmiBackend(module)
    backend.open()
    module.hang[3] = gate  # from now on, every call for GPU 3 blocks in the "driver"
    holder["module"] = module
    return backend


def _cell_text(app: TunelabApp, index: int) -> str:
    return app.main.query_one(GpuPanel).cell_text(index).plain


async def test_one_hung_and_one_failing_gpu_leave_the_rest_and_the_ui_working() -> None:
    gate = threading.Event()
    holder: dict[str, Any] = {}
    svc = replace(
        services(gpus=True, rate_hz=5.0), telemetry=lambda: _hanging_backend(gate, holder)
    )
    app = TunelabApp(services=svc)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: app.sampler is not None, what="the sampler")
            await wait_for(
                pilot, lambda: app.main.query_one(GpuPanel).cell_count == 8, what="8 GPU cells"
            )
            await wait_for(
                pilot,
                lambda: "%" in _cell_text(app, 0) and "error" in _cell_text(app, 3),
                what="GPU 0 with values and GPU 3 as an error",
            )
            # Healthy GPUs keep being refreshed while GPU 3 is stuck in its driver call.
            t_first = app.sampler.latest_time
            calls_before = sum(1 for _, i in holder["module"].calls if i == 0)
            await pilot.pause(1.0)
            assert app.sampler.latest_time > t_first
            assert sum(1 for _, i in holder["module"].calls if i == 0) > calls_before
            # One tick on a loaded 2-core box may see a healthy GPU's read time out too (the
            # sampler's per-GPU deadline, shown as it is): what must hold is that the healthy
            # GPUs read cleanly again while GPU 3 stays stuck, not that no tick ever lagged.
            healthy_gpus = (0, 1, 2, 4, 6, 7)

            def healthy_clean() -> bool:
                snaps = {s.index: s for s in app.sampler.latest()}
                return all(not snaps[i].error for i in healthy_gpus) and all(
                    "error" not in _cell_text(app, i) for i in healthy_gpus
                )

            await wait_for(pilot, healthy_clean, 10, "every healthy GPU read cleanly")
            snaps = {s.index: s for s in app.sampler.latest()}
            assert (
                snaps[3].error and "timed out" in snaps[3].error and snaps[3].gfx_activity is None
            )
            assert snaps[5].error and snaps[5].power_w is None
            for broken in (3, 5):
                assert "error" in _cell_text(app, broken) or "N/A" in _cell_text(app, broken)
            # The UI answers a key at once (theme switch) while the driver call is stuck.
            dark = app.current_theme.dark
            await pilot.press("d")
            await pilot.pause(0.1)
            assert app.current_theme.dark != dark
            # And quits promptly: a stuck driver thread must not hold the exit.
            t0 = time.monotonic()
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, timeout=10, what="the app to exit")
            assert time.monotonic() - t0 < 5.0
    finally:
        gate.set()  # release the stuck "driver" thread


async def test_a_telemetry_poll_after_the_gpu_panel_is_gone_is_skipped_not_raised() -> None:
    """At quit the screen's widgets go before the app's timers stop; a poll then must not crash."""
    from tui.widgets.gpu_panel import GpuPanel

    app = TunelabApp(services=services(gpus=True, rate_hz=5.0))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.sampler is not None, what="the sampler")
        await wait_for(
            pilot, lambda: app.main.query_one(GpuPanel).cell_count == 8, what="8 GPU cells"
        )
        snaps = app.sampler.latest()  # type: ignore[union-attr]
        histories = [[] for _ in snaps]
        assert app.main.show_telemetry(snaps, histories) is True
        await app.main.query_one(GpuPanel).remove()
        assert app.main.show_telemetry(snaps, histories) is False
        app._last_tick = None  # force the next poll to try again
        app._poll_telemetry()  # the timer's own path: no NoMatches escapes
        await pilot.pause()
        assert app.return_code is None  # still running, no crash
