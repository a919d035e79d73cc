"""The Run panel shows every trial of a study that runs them side by side (issue 15).

Two fake GPUs (``TUNELAB_FORCE_GPU_COUNT=2``) and the study engine double: a
two-point sweep from the TUI runs both points at once on the one scheduler.
What the panel lists is checked against the core's own ``StudyStatus``
(the tracker's slot states), not against a copy of the scheduling.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Input, Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished
from tuner.trials import events as ev
from tuner.trials.slots import FORCE_ENV


async def test_run_panel_lists_every_running_trial(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    seen: list[Any] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"input_len": "32", "output_len": "16", "num_prompts": "16"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        panel = app.main.run_panel
        shown: list[tuple[ev.StudyStatus, str]] = []
        original = panel.study_status

        def record(status: ev.StudyStatus) -> None:
            original(status)
            shown.append((status, str(panel.query_one("#run-slots", Static).render())))

        panel.study_status = record  # type: ignore[method-assign]
        assert app.jobs.submit_sweep("max-num-seqs=2,4") is not None
        await wait_for(
            pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 120, "the sweep"
        )
        both = [(s, text) for s, text in shown if sum(x.trial_id is not None for x in s.slots) == 2]
        assert both, [s.slots for s, _ in shown]  # the core ran the two points at once
        status, text = both[0]
        assert f"{status.running} running on 2 slots" in text
        for slot in status.slots:
            assert slot.trial_id is not None
            assert f"{slot.label} {slot.trial_id[:8]} {slot.stage}" in text, (slot, text)
