"""A first start says what it waits for (issue 32): the header counts the vLLM probe's seconds.

In a new home the first start imports vLLM once to introspect it (~30-60 s on
the CPU engine) and the screen said only "probing…". The probe is held here
(a recorded answer, released by the test) to read the header while it waits.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

from tests.support.tui_harness import recorded_vllm_info, services, wait_for
from tui.app import TunelabApp
from tui.widgets.status_bar import StatusBar


async def test_the_header_counts_the_probe_and_shows_the_version_after() -> None:
    release = threading.Event()

    def slow_probe():  # type: ignore[no-untyped-def]
        release.wait(30)
        return recorded_vllm_info()

    app = TunelabApp(services=replace(services(), introspect=slow_probe))
    async with app.run_test(size=(80, 24)) as pilot:
        bar = app.main.query_one(StatusBar)

        # The clock counts: some second >= 2 shows (on a loaded box a late 1 s tick may round
        # past "2 s" to "3 s": the test asked for one exact second and flaked in a rehearsal).
        def counted() -> bool:
            found = re.search(r"probing… (\d+) s", bar.vllm)
            return found is not None and int(found.group(1)) >= 2

        await wait_for(pilot, counted, 10, "the probe clock", seen=lambda: bar.vllm)
        assert "first start" in bar.vllm
        release.set()
        await wait_for(pilot, lambda: "0.32.0" in bar.vllm, 10, "the version")
        await pilot.pause(1.2)
        assert "probing" not in bar.vllm  # the clock stopped with the answer
