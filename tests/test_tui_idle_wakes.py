"""What wakes an idle TUI: only the telemetry poll, at the sampling rate (issue 32's idle CPU).

Every repeating timer is a wake of the event loop whether it has anything to
draw or not; at idle with GPUs the panel's poll is the one with work to do.
A widget that ticks on its own while idle (Textual's ProgressBar starts a 1 Hz
ETA refresh on mount, hidden or not) costs idle CPU for nothing: this lists
every repeating timer that runs in the idle app and names its owner.
"""

from __future__ import annotations

from textual.dom import DOMNode

from tests.support.tui_harness import services, wait_for
from tui.app import TunelabApp
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.knob_panel import KnobRow


def _ticking(app: TunelabApp) -> list[tuple[str, float]]:
    """(owner, interval) of every running repeating timer of the app and its widgets."""
    nodes: list[DOMNode] = [app, app.main, *app.main.walk_children()]
    out = []
    for node in nodes:
        for timer in list(node._timers):
            running = timer._task is not None and timer._active.is_set()
            if running and timer._repeat is None:  # repeat None: until stopped
                out.append((type(node).__name__, float(timer._interval)))
    return sorted(out)


async def test_an_idle_tui_with_gpus_wakes_only_for_the_telemetry_poll() -> None:
    app = TunelabApp(services=services(gpus=True, rate_hz=2.0))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: bool(app.main.query(KnobRow)), what="knob rows")
        panel = app.main.query_one(GpuPanel)
        await wait_for(pilot, lambda: panel.cell_count == 8, what="8 GPU cells")
        await wait_for(pilot, lambda: "%" in panel.cell_text(0).plain, what="a GPU reading")
        await pilot.pause(0.3)
        assert _ticking(app) == [("TunelabApp", 0.5)]
