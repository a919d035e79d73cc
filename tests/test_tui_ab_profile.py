"""The profiled A/B in the TUI (issue 29): `P` asks for it, the compare view says why B is faster.

The compare view is read against the core: a stored profiled A/B of real
``Trial`` objects whose profiles are the recorded real vLLM CPU traces
(tests/data/traces: max-num-seqs 1 in A, 32 in B), judged by ``Study.compare``;
what the screen shows is that report's ``ArmsExplanation``. The key's test
records what the app asks of its job queue; the run itself is
tests/test_profile_capture.py's (engine double) and tests/test_studies_engine.py's
(real engine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Static

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.screens.compare import CompareScreen
from tui.widgets.run_panel import stage_line
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.lab.job_spec import ABJobSpec, JobSpecError
from tuner.lab.study import Study
from tuner.profiles.families import LABELS
from tuner.profiles.record import ProfileRecord
from tuner.profiles.trace import profile_of
from tuner.trials.model import Trial, TrialStatus

TRACES = Path(__file__).parent / "data" / "traces"
LOAD = Workload(input_len=16, output_len=8, num_prompts=4, concurrency=4)


def _arm(arm: str, repeat: int, seqs: int, tok_s: float, trace: str | None) -> Trial:
    profile = None
    if trace is not None:
        summary = profile_of(TRACES / f"{trace}.pt.trace.json.gz", "cpu")
        profile = ProfileRecord(
            trace=f"/traces/{trace}",
            requests=4,
            concurrency=4,
            started_at=2.0,
            ended_at=3.0,
            measured_ended_at=1.0,
            summary=summary,
        ).to_dict()
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": seqs}),
        workload=LOAD,
        study="t",
        status=TrialStatus.DONE,
        results={"output_throughput": tok_s, "median_ttft_ms": 40.0 / seqs},
        arm=arm,
        repeat=repeat,
        tags={"kind": "ab", "repeats": 2, "wave": repeat},
        profile=profile,
    )


def _profiled_ab() -> list[Trial]:
    return [
        _arm("A", 0, 1, 450.0, "cpu-max-num-seqs-1"),
        _arm("B", 0, 32, 1300.0, "cpu-max-num-seqs-32"),
        _arm("B", 1, 32, 1250.0, None),
        _arm("A", 1, 1, 470.0, None),
    ]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_compare_view_says_why_b_is_faster_as_the_core_does(
    size: tuple[int, int],
) -> None:
    study = Study(None, "t", _profiled_ab())
    app: App[None] = App()
    async with app.run_test(size=size) as pilot:
        screen = CompareScreen(study)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.comparison is not None, 10, "the comparison")
        await pilot.pause()
        found = screen.comparison.report.explanation  # type: ignore[union-attr]
        assert found is not None and found.explanation is not None
        note = str(screen.query_one("#compare-note", Static).render())
    flat = " ".join(note.split())
    assert " ".join(f"why: {found.summary()}".split()) in flat, flat
    # Every family either arm spent time in, with the core's B − A, then the unexplained rest.
    for row in found.explanation.rows:
        if row.a_ms or row.b_ms:
            assert f"{LABELS[row.family]} {row.delta_ms:+.3f}" in flat, (row.family, flat)
    assert f"unexplained {found.explanation.unexplained_ms:+.3f}" in flat
    # The arms' difference is measured on the profiled launches (A 450, B 1300 tok/s).
    assert found.explanation.total_ms == pytest.approx(1e3 / 1300.0 - 1e3 / 450.0)


async def test_a_failed_profile_is_named_in_the_compare_view() -> None:
    trials = _profiled_ab()
    trials[1].profile = ProfileRecord(error="vLLM wrote no worker trace within 180 s").to_dict()
    study = Study(None, "t", trials)
    app: App[None] = App()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = CompareScreen(study)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.comparison is not None, 10, "the comparison")
        await pilot.pause()
        note = " ".join(str(screen.query_one("#compare-note", Static).render()).split())
    assert "why: profile: no explanation (arm B's profile: vLLM wrote no worker trace" in note
    assert "by family" not in note


async def test_shift_p_queues_a_profiled_ab_and_a_queues_a_plain_one(
    tunelab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = TunelabApp(services=services())
    asked: list[bool] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        monkeypatch.setattr(app.jobs, "submit_ab", lambda profile=False: asked.append(profile))
        await pilot.press("P")
        await pilot.press("a")
        await pilot.pause()
    assert asked == [True, False]


def test_the_run_panel_draws_the_profiling_window_after_measuring() -> None:
    line = stage_line("profiling", "CPU_ATTN").plain
    assert line.endswith("measuring → profiling"), line
    assert "profiling" not in stage_line("measuring", "CPU_ATTN").plain
    # At 40 columns the passed stages give way, never the current one.
    assert stage_line("profiling", "CPU_ATTN", width=40).plain.endswith("→ profiling")


def _spec(**changes: Any) -> dict[str, Any]:
    a = EngineConfig(model="m", engine={"max-num-seqs": 1})
    b = EngineConfig(model="m", engine={"max-num-seqs": 32})
    data = ABJobSpec("s", None, a, b, LOAD, 2, 600.0, profile=True).to_dict()
    return {**data, **changes}


def test_a_detached_ab_spec_carries_the_profile_request() -> None:
    spec = ABJobSpec.from_dict(_spec())
    assert spec.profile and spec.plan().profile
    older = _spec()
    del older["profile"]  # a spec an older tunelab wrote
    assert not ABJobSpec.from_dict(older).profile
    with pytest.raises(JobSpecError, match="profile must be true or false"):
        ABJobSpec.from_dict(_spec(profile="yes"))
