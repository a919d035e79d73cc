"""Writes SVG screenshots of the TUI's screens into ``screenshots/``, from the app itself.

Each screen is reached by driving the real app with Textual's pilot and saved
with ``app.save_screenshot``. Two boundaries are replaced, and the file names
say so: the GPU panel of ``main-8gpus-fake-amdsmi.svg`` reads the FAKE amdsmi
module from ``tests/fakes`` (no GPU exists here), and the run, results,
compare and export screens measure the ENGINE DOUBLE
(``tests/support/study_engine_double.py``, a stdlib server that answers like
vLLM and whose speed follows ``max-num-seqs``) so the script takes seconds,
not the minutes that six real CPU-engine starts take. The A/B progress, the
engine-log view (`l`) and the key help (`?`) are shot during and after the A/B. Everything else — the
knob catalogue, the rules, the trial runner, the A/B statistics, the export —
is the real code.

Run: ``.venv/bin/python scripts/screenshots.py [--out screenshots] [--size 120x36]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


async def _shoot(app: Any, out: Path, name: str) -> Path:
    path = out / name
    app.save_screenshot(filename=name, path=str(out))
    print(f"wrote {path}")
    return path


async def main_screens(out: Path, size: tuple[int, int]) -> None:
    """Main screen without GPU, with an error finding, with 8 fake GPUs."""
    from tests.support.tui_harness import services, settle, wait_for
    from tui.app import TunelabApp
    from tui.widgets.knob_panel import KnobPanel

    app = TunelabApp(services=services())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await _shoot(app, out, "main.svg")
        panel = app.main.query_one(KnobPanel)
        panel.row("max-num-batched-tokens").control.value = "512"  # type: ignore[union-attr]
        panel.row("enable-chunked-prefill").control.value = "off"  # type: ignore[union-attr]
        panel.row("enable-chunked-prefill").control.focus()
        panel.scroll_to_widget(panel.row("enable-chunked-prefill"), animate=False)
        await pilot.pause(0.3)
        await _shoot(app, out, "main-finding-error.svg")

    app = TunelabApp(model="tunelab:demo", services=services(gpus=True, rate_hz=4.0))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await wait_for(
            pilot, lambda: app.sampler is not None and app.sampler.ticks >= 8, what="8 samples"
        )
        await wait_for(pilot, lambda: app.session.model_info is not None, what="model")
        await pilot.pause(0.6)
        await _shoot(app, out, "main-8gpus-fake-amdsmi.svg")


async def run_and_results(out: Path, size: tuple[int, int]) -> None:
    """A run in progress, then an A/B, the results table, the compare view, the export dialog."""
    from textual.widgets import Input

    from tests.support.tui_harness import services, settle, wait_for
    from tui.app import TunelabApp
    from tui.messages import JobFinished, RunEvent
    from tui.widgets.knob_panel import KnobPanel

    os.environ["DOUBLE_TOKEN_MS"] = "10"
    seen: list[Any] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=size, message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {
            "input_len": "64",
            "output_len": "32",
            "num_prompts": "48",
            "concurrency": "8",
        }.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        await pilot.press("r")

        def progressed() -> bool:
            events = [m.event for m in seen if isinstance(m, RunEvent)]
            return sum(type(e).__name__ == "TrialProgress" for e in events) >= 5

        await wait_for(pilot, progressed, 60, "progress events")
        await _shoot(app, out, "run-engine-double.svg")
        await wait_for(pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 120, "the run")
        panel = app.main.query_one(KnobPanel)
        panel.row("max-num-seqs").control.value = "2"  # type: ignore[union-attr]
        panel.row("enforce-eager").control.focus()
        await pilot.pause()
        await pilot.press("a")

        def job_line() -> str:
            return str(app.main.query_one("#run-job").render())

        await wait_for(pilot, lambda: "launch 2 of" in job_line(), 120, "the A/B's 2nd launch")
        await pilot.pause(1.2)  # the once-a-second clock has drawn the ETA
        await _shoot(app, out, "ab-progress-engine-double.svg")
        await wait_for(
            pilot, lambda: sum(isinstance(m, JobFinished) for m in seen) >= 2, 300, "the A/B"
        )
        await pilot.pause(0.3)
        await _shoot(app, out, "ab-verdict-engine-double.svg")
        await pilot.press("l")
        await pilot.pause(0.5)
        await _shoot(app, out, "engine-log-engine-double.svg")
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause(0.5)
        await _shoot(app, out, "key-help.svg")
        await pilot.press("escape")
        await pilot.press("t")
        await pilot.pause(0.5)
        await _shoot(app, out, "results-engine-double.svg")
        await pilot.press("escape")
        await pilot.press("c")
        await pilot.pause(0.5)
        await _shoot(app, out, "compare-engine-double.svg")
        await pilot.press("escape")
        await pilot.press("e")
        await pilot.pause(0.5)
        with tempfile.TemporaryDirectory() as tmp:
            app.screen.query_one("#export-dir", Input).value = tmp
            app.screen.do_export()  # type: ignore[attr-defined]
            await pilot.pause(0.3)
            await _shoot(app, out, "export-engine-double.svg")


def parse_size(text: str) -> tuple[int, int]:
    try:
        cols, rows = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--size must look like 120x36, not {text!r}") from None
    if cols < 80 or rows < 24:
        raise SystemExit("--size must be at least 80x24 (the smallest terminal tunelab supports)")
    return cols, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "screenshots")
    parser.add_argument("--size", default="120x36")
    args = parser.parse_args()
    size = parse_size(args.size)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tunelab-shots-") as home:
        os.environ["TUNELAB_HOME"] = home  # a clean store: only this script's trials
        asyncio.run(main_screens(args.out, size))
        asyncio.run(run_and_results(args.out, size))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
