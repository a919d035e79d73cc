"""Progress of long jobs (issue 13): engine start in seconds, A/B launch k of n with arm and ETA.

The A/B runs the study ENGINE DOUBLE, slowed at start (``DOUBLE_STARTUP_S``)
so the start is long enough to watch; the labels checked are the core's own
A/B schedule (``tuner.studies.ab.schedule``), not a copy of it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from textual.message import Message
from textual.widgets import Input, Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished
from tui.widgets.knob_panel import KnobPanel
from tuner.lab.run import AB_REPEATS
from tuner.studies.ab import schedule


def _text(app: TunelabApp, widget_id: str) -> str:
    return str(app.main.query_one(widget_id, Static).render())


def _record_updates(monkeypatch: pytest.MonkeyPatch, app: TunelabApp, widget_id: str) -> list[str]:
    """Every text ``widget_id`` is given from now on, in order (what the screen showed)."""
    widget = app.main.query_one(widget_id, Static)
    shown: list[str] = []
    update = widget.update

    def recording(content: Any = "", *, layout: bool = True) -> None:
        shown.append(str(content))
        update(content, layout=layout)

    monkeypatch.setattr(widget, "update", recording)
    return shown


async def _workload(pilot: Any) -> None:
    for name, text in {"output_len": "4", "num_prompts": "4", "concurrency": "4"}.items():
        pilot.app.main.query_one(f"#wl-{name}", Input).value = text
    await pilot.pause()


async def test_ab_shows_arm_launch_k_of_n_elapsed_and_eta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A start of 4 s leaves the 1 Hz count several frames to show, however late a
    # loaded box runs the timer; the A/B below starts its engines faster.
    monkeypatch.setenv("DOUBLE_STARTUP_S", "4")
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        await settle(pilot)
        await _workload(pilot)
        shown = _record_updates(monkeypatch, app, "#run-stage")
        await pilot.press("r")
        await wait_for(pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 60, "run")
        # The engine start counts seconds (it showed `--%`): every line the stage
        # showed is kept, so a poll that comes late cannot miss the count.
        counting = [t for t in shown if re.search(r"^starting → ready → .* [1-9]\d* s$", t)]
        assert counting, shown
        monkeypatch.setenv("DOUBLE_STARTUP_S", "2.5")
        app.main.query_one(KnobPanel).row("max-num-seqs").control.value = "2"  # type: ignore[union-attr]
        await pilot.pause()
        await pilot.press("escape", "a")
        plan = [f"{arm}{rep + 1}" for arm, rep in schedule(AB_REPEATS)]
        n = len(plan)
        await wait_for(
            pilot,
            lambda: "launch 1 of" in _text(app, "#run-job"),
            20,
            "launch 1",
            seen=lambda: _text(app, "#run-job"),
        )
        first = _text(app, "#run-job")
        assert f"launch 1 of {n}" in first and f"arm {plan[0]}" in first, first
        assert "ETA after the first launch" in first
        await wait_for(pilot, lambda: "launch 2 of" in _text(app, "#run-job"), 60, "launch 2")
        await pilot.pause(1.2)  # the once-a-second clock redraws
        second = _text(app, "#run-job")
        assert f"launch 2 of {n}" in second and f"arm {plan[1]}" in second, second
        assert re.search(r"ETA ~\d", second), second
        assert "elapsed" in second
        await wait_for(
            pilot, lambda: sum(isinstance(m, JobFinished) for m in seen) >= 2, 120, "the A/B"
        )
