"""With no GPU, the GPU panel's place shows the host's and the engine's CPU and memory (issue 13).

The "engine" is the app's child process tree: here a real busy child
process started by the test, read by psutil as the panel reads vLLM's.
"""

from __future__ import annotations

import re
import subprocess
import sys

import psutil
from textual.widgets import Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp


async def test_no_gpu_panel_shows_host_and_engine_load() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        line = app.main.query_one("#host-load", Static)

        def text() -> str:
            return str(line.render())

        await wait_for(pilot, lambda: "engine not running" in text(), 30, "the idle host line")
        cores = psutil.cpu_count()
        assert re.search(rf"host CPU \d+% of {cores} cores · mem [\d.]+/[\d.]+ GiB", text())
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            await wait_for(
                pilot,
                lambda: (
                    (m := re.search(r"engine 1 proc: CPU (\d+)%", text())) is not None
                    and int(m.group(1)) >= 5
                ),
                15,
                "the busy child's CPU",
            )
            rss = psutil.Process(busy.pid).memory_info().rss / 1024**3
            shown = float(re.search(r"RSS ([\d.]+) GiB", text()).group(1))  # type: ignore[union-attr]
            assert abs(shown - rss) < 0.05, (shown, rss)
        finally:
            busy.kill()
            busy.wait()
        await wait_for(pilot, lambda: "engine not running" in text(), 30, "the child gone")
