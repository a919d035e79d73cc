"""The run panel shows tunelab's events; the engine log is one key away (issue 13).

A run of the study ENGINE DOUBLE wrapped so that, like vLLM, it writes noise
when told to stop (``nanobind: leaked …`` and a traceback on SIGTERM): the
run panel must show the result and tunelab's own events only, and the log
view (`l`) every engine line, the shutdown ones marked, with the log file.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.message import Message
from textual.widgets import Input, RichLog

from tests.support.tui_harness import DOUBLE, services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished
from tui.screens.log_view import SHUTDOWN_MARK, LogView
from tui.widgets.knob_panel import KnobPanel

NOISE = "nanobind: leaked 7 instances!"
# Runs the double; on SIGINT (tunelab's stop request) prints what vLLM 0.32 prints at shutdown, then exits.
WRAPPER = f"""
import os, runpy, signal, sys
def bye(*_):
    print({NOISE!r}, flush=True)
    print("Traceback (most recent call last):", flush=True)
    print("asyncio.exceptions.CancelledError", flush=True)
    os._exit(0)
signal.signal(signal.SIGINT, bye)  # tunelab stops vLLM with SIGINT first
_install = signal.signal
def _keep_bye(sig, handler):  # the double installs its own SIGINT handler: keep ours
    return bye if sig == signal.SIGINT else _install(sig, handler)
signal.signal = _keep_bye
print(os.environ.get("NOISY_START_LINE", ""), flush=True)
sys.argv = [{str(DOUBLE)!r}] + sys.argv[1:]
runpy.run_path({str(DOUBLE)!r}, run_name="__main__")
"""


def noisy_command(config: Any) -> list[str]:
    return [
        sys.executable,
        "-c",
        WRAPPER,
        "--port",
        "{port}",
        "--host",
        "{host}",
        *config.engine_args(),
    ]


def _lines(log: RichLog) -> list[str]:
    return [strip.text for strip in log.lines]


async def test_run_panel_keeps_engine_noise_out_and_the_log_view_marks_shutdown() -> None:
    seen: list[Message] = []
    app = TunelabApp(services=replace(services(), engine_command=noisy_command))
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "8", "num_prompts": "8", "concurrency": "4"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 90, "run")
        done = next(m for m in seen if isinstance(m, JobFinished))
        assert done.ok, done.summary
        trial = app.session.trials[-1]
        await pilot.pause(0.3)
        panel_text = "\n".join(_lines(app.main.query_one("#run-log", RichLog)))
        assert "study engine double" not in panel_text  # the engine's own lines are not here
        assert NOISE not in panel_text and "Traceback" not in panel_text
        assert "engine ready after" in panel_text and f"trial {trial.short_id}" in panel_text

        await pilot.press("l")
        await pilot.pause(0.3)
        assert isinstance(app.screen, LogView)
        view = app.screen
        lines = _lines(view.query_one("#log-lines", RichLog))
        assert any("study engine double: max-num-seqs" in line for line in lines)
        started = next(line for line in lines if "Uvicorn running" in line)
        assert not started.startswith(SHUTDOWN_MARK)  # live output is not marked
        noise = next(line for line in lines if NOISE in line)
        assert noise.startswith(SHUTDOWN_MARK)
        assert all(line.startswith(SHUTDOWN_MARK) for line in lines if "Traceback" in line)
        header = str(view.query_one("#log-header").render())
        assert trial.log_path and str(trial.log_path) in header
        assert NOISE in Path(trial.log_path).read_text()  # the path shown is the real file

        # Search: only matching lines stay.
        await pilot.press("slash")
        view.query_one("#log-search", Input).value = "uvicorn"
        await pilot.pause(0.2)
        kept = _lines(view.query_one("#log-lines", RichLog))
        assert kept and all("uvicorn" in line.lower() for line in kept)
        assert "1 match" in str(view.query_one("#log-header").render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main


# vLLM 0.32's start line when it switched cudagraph_mode to NONE (config/vllm.py ~2700).
CONFIG_LINE = (
    "INFO [llm_engine.py:70] Initializing a V1 LLM engine (v0.32.0) with config: model='m', "
    "dtype=torch.float32, max_seq_len=2048, "
    "compilation_config={'level': 0, 'cudagraph_mode': <CUDAGraphMode.NONE: 0>}"
)


async def test_run_panel_shows_what_vllm_ran_differently_from_the_request(
    monkeypatch: Any,
) -> None:
    from tuner.engine import effective

    monkeypatch.setenv("NOISY_START_LINE", CONFIG_LINE)
    seen: list[Message] = []
    app = TunelabApp(services=replace(services(), engine_command=noisy_command))
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "4", "num_prompts": "4", "concurrency": "4"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        app.main.query_one(KnobPanel).row("cudagraph-mode").control.value = "FULL"  # type: ignore[union-attr]
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 90, "run")
        await pilot.pause(0.3)
        trial = app.session.trials[-1]
        ran = effective.of_trial(trial.effective)
        assert ran is not None and ran.mismatches  # the core saw it ...
        shown = str(app.main.query_one("#run-effective").render())
        for m in ran.mismatches:  # ... and the panel shows every one of them
            assert f"{m.knob}={m.effective} ≠ requested {m.requested}" in shown, shown
        assert "cudagraph-mode=NONE ≠ requested FULL" in shown
        # Events wrap inside the panel: read them as one text.
        events = " ".join(" ".join(_lines(app.main.query_one("#run-log", RichLog))).split())
        assert "requested cudagraph-mode=FULL, but vLLM ran NONE" in events
