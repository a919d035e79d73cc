"""With no GPU, the GPU panel's place shows the host's and the engine's CPU and memory (issue 13).

"The engine" is the process trees of the engines this process runs, as
:mod:`tuner.engine.running` reports them: the panel's figures are checked
against that core answer and against psutil, never against a copy of its
logic. Another child of the process (a reaper, a helper) is not the engine.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading

import httpx
import psutil
import pytest
from textual.widgets import Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tuner.engine import running

ENGINE_PART = re.compile(r"engine (?:not running|(\d+) procs?: CPU (\d+)% · RSS ([\d.]+) GiB)")


def engine_procs(text: str) -> int | None:
    """How many engine processes the line reports (0: not running; None: no line yet)."""
    match = ENGINE_PART.search(text)
    if match is None:
        return None
    return int(match.group(1)) if match.group(1) else 0


async def test_host_line_counts_the_engines_not_every_child() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        line = app.main.query_one("#host-load", Static)

        def text() -> str:
            return str(line.render())

        await wait_for(pilot, lambda: engine_procs(text()) is not None, 30, "the host line")
        cores = psutil.cpu_count()
        assert re.search(rf"host CPU \d+% of {cores} cores · mem [\d.]+/[\d.]+ GiB", text())
        # A busy child of this process that is not an engine must not show as one.
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            seen: list[tuple[int | None, int]] = []

            def settled() -> bool:
                seen.append((engine_procs(text()), len(running.engine_pids())))
                return len(seen) > 80  # ~4 s of once-a-second updates (50 ms pumps)

            await wait_for(pilot, settled, 30, "a few host-line updates")
            assert all(shown == core for shown, core in seen[-10:]), seen[-10:]
        finally:
            busy.kill()
            busy.wait()


@pytest.mark.engine
async def test_host_line_shows_the_running_engines_load(cpu_engine) -> None:
    """The shared real CPU engine under load: procs, CPU and RSS as psutil reads its tree."""
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(base_url=cpu_engine.url, timeout=60) as client:
            while not stop.is_set():
                body = {"model": cpu_engine.served_model, "prompt": "hello", "max_tokens": 32}
                try:
                    client.post("/v1/completions", json=body)
                except httpx.HTTPError:
                    stop.wait(0.2)

    driver = threading.Thread(target=load, daemon=True)
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        line = app.main.query_one("#host-load", Static)

        def text() -> str:
            return str(line.render())

        driver.start()
        try:
            await wait_for(
                pilot,
                lambda: (
                    (m := ENGINE_PART.search(text())) is not None
                    and m.group(1) is not None
                    and int(m.group(2)) >= 5
                ),
                60,
                "the engine's CPU under load",
            )
            pids = running.engine_pids()
            assert set(cpu_engine.pids) & pids, "the shared engine is one of the running engines"
            assert engine_procs(text()) == len(pids), (text(), pids)
            rss = sum(psutil.Process(p).memory_info().rss for p in pids) / 1024**3
            shown = float(ENGINE_PART.search(text()).group(3))  # type: ignore[union-attr]
            assert abs(shown - rss) < max(0.1, 0.1 * rss), (shown, rss)
        finally:
            stop.set()
            driver.join(timeout=90)
