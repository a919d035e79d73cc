"""The profiled A/B in the TUI (issue 29): `P` asks for it, the compare view says why B is faster.

The compare view is read against the core: a stored profiled A/B of real
``Trial`` objects whose profiles are the recorded real vLLM CPU traces
(tests/data/traces: max-num-seqs 1 in A, 32 in B), judged by ``Study.compare``;
what the screen shows is that report's ``ArmsExplanation``, figure for figure,
under the app's own stylesheet (at 80×24 the layout is the point). The key's
test records what the app hands the core (the plan, the detached job's spec);
the run itself is tests/test_profile_capture.py's (engine double) and
tests/test_studies_engine.py's (real engine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.message import Message
from textual.widgets import DataTable, RichLog, Static

from tests.support.tui_harness import services, settle, shown_lines, wait_for
from tui import detached
from tui.app import TunelabApp
from tui.messages import JobFinished
from tui.screens.compare import UNEXPLAINED, CompareScreen
from tui.widgets.run_panel import RunPanel, stage_line
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.lab import run as lab_run
from tuner.lab.job_spec import ABJobSpec, JobSpecError
from tuner.lab.plans import ABPlan
from tuner.lab.study import Study
from tuner.profiles.families import LABELS
from tuner.profiles.record import ProfileRecord
from tuner.profiles.trace import profile_of
from tuner.service.errors import ServiceError
from tuner.studies.ab import build_report
from tuner.studies.ab_judgement import TAG as JUDGEMENT_TAG
from tuner.studies.ab_judgement import Judgement
from tuner.studies.stats import DEFAULT_METRICS
from tuner.trials.model import Trial, TrialStatus

TRACES = Path(__file__).parent / "data" / "traces"
LOAD = Workload(input_len=16, output_len=8, num_prompts=4, concurrency=4)


class Styled(App[None]):
    """A bare app with the TUI's stylesheet: the compare view's layout as users get it."""

    CSS_PATH = TunelabApp.CSS_PATH


def _results(arm: str, tok_s: float) -> dict[str, float]:
    """Every metric an A/B compares (the 80×24 table is then as long as a real one)."""
    latency = 30.0 if arm == "A" else 12.0
    return {m: tok_s if "throughput" in m else latency * tok_s / 1000 for m in DEFAULT_METRICS}


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
    judged = Judgement(0.95, 0.0, DEFAULT_METRICS).to_tag()
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": seqs}),
        workload=LOAD,
        study="t",
        status=TrialStatus.DONE,
        results=_results(arm, tok_s),
        arm=arm,
        repeat=repeat,
        tags={"kind": "ab", "repeats": 2, "wave": repeat, JUDGEMENT_TAG: judged},
        profile=profile,
    )


def _profiled_ab() -> list[Trial]:
    return [
        _arm("A", 0, 1, 450.0, "cpu-max-num-seqs-1"),
        _arm("B", 0, 32, 1300.0, "cpu-max-num-seqs-32"),
        _arm("B", 1, 32, 1250.0, None),
        _arm("A", 1, 1, 470.0, None),
    ]


async def _compare(pilot: Any, trials: list[Trial]) -> CompareScreen:
    screen = CompareScreen(Study(None, "t", trials))
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.comparison is not None, 10, "the comparison")
    await pilot.pause()
    return screen


def _flat(widget: Static) -> str:
    return " ".join(str(widget.render()).split())


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_compare_view_says_why_b_is_faster_as_the_core_does(
    size: tuple[int, int],
) -> None:
    async with Styled().run_test(size=size) as pilot:
        screen = await _compare(pilot, _profiled_ab())
        found = screen.comparison.report.explanation  # type: ignore[union-attr]
        assert found is not None and found.explanation is not None
        note = _flat(screen.query_one("#compare-note", Static))
        table = screen.query_one("#compare-why", DataTable)
        shown = {str(key.value): [str(c) for c in table.get_row(key)] for key in table.rows}
        order = [str(key.value) for key in table.rows]
    assert " ".join(f"why: {found.summary()}".split()) in note, note
    # Every family either arm spent time in, with the core's figures, then the unexplained rest.
    ex = found.explanation
    rows = [r for r in ex.rows if r.a_ms or r.b_ms]
    assert len(rows) < len(ex.rows)  # a family neither arm ran (MoE on this model) is left out
    assert order == [LABELS[r.family] for r in rows] + [UNEXPLAINED]
    for r in rows:
        label = LABELS[r.family]
        assert shown[label] == [label, f"{r.a_ms:.3f}", f"{r.b_ms:.3f}", f"{r.delta_ms:+.3f}"]
    assert shown[UNEXPLAINED] == [UNEXPLAINED, "", "", f"{ex.unexplained_ms:+.3f}"]
    # The arms' difference is measured on the profiled launches (A 450, B 1300 tok/s).
    assert ex.total_ms == pytest.approx(1e3 / 1300.0 - 1e3 / 450.0)


async def test_at_80x24_keys_reach_every_metric_and_every_family() -> None:
    """The note stays whole and the screen does not scroll (keys could not scroll it): the
    metrics and the family table share the rest, each scrolling itself; Tab moves between."""
    async with Styled().run_test(size=(80, 24)) as pilot:
        screen = await _compare(pilot, _profiled_ab())
        metrics = screen.query_one("#compare-table", DataTable)
        why = screen.query_one("#compare-why", DataTable)
        note = screen.query_one("#compare-note", Static)
        assert screen.max_scroll_y == 0
        assert note.region.bottom <= why.region.y and why.region.bottom <= 23  # footer: row 23
        assert metrics.region.height >= 5 and why.region.height >= 5  # a header and 4 rows
        assert why.row_count + 1 > why.region.height  # this one does scroll at 80×24
        await pilot.press("tab")
        assert pilot.app.focused is why
        for _ in range(why.row_count):
            await pilot.press("down")
        await pilot.pause()
        last = why.get_row_at(why.cursor_row)
        assert str(last[0]) == UNEXPLAINED
        assert UNEXPLAINED in " ".join(shown_lines(why))  # scrolled into view, not only selected


async def test_a_failed_profile_is_named_and_no_family_table_drawn() -> None:
    trials = _profiled_ab()
    trials[1].profile = ProfileRecord(error="vLLM wrote no worker trace within 180 s").to_dict()
    async with Styled().run_test(size=(120, 40)) as pilot:
        screen = await _compare(pilot, trials)
        found = screen.comparison.report.explanation  # type: ignore[union-attr]
        note = _flat(screen.query_one("#compare-note", Static))
        drawn = screen.query_one("#compare-why", DataTable).display
    assert found is not None and found.explanation is None
    assert "why: profile: no explanation (arm B's profile: vLLM wrote no worker trace" in note
    assert " ".join(found.summary().split()) in note
    assert not drawn


async def test_an_unprofiled_ab_shows_no_why() -> None:
    trials = _profiled_ab()
    for trial in trials:
        trial.profile = None
    async with Styled().run_test(size=(80, 24)) as pilot:
        screen = await _compare(pilot, trials)
        assert screen.comparison is not None and screen.comparison.report.explanation is None
        assert "why:" not in _flat(screen.query_one("#compare-note", Static))
        assert not screen.query_one("#compare-why", DataTable).display


def _baseline(study: str) -> Study:
    """A study whose baseline is one finished trial (the A/B's A), without a store."""
    trial = _arm("A", 0, 1, 450.0, None)
    trial.study, trial.arm, trial.tags = study, None, {}
    return Study(None, study, [trial])


def _ended(seen: list[Message]) -> int:
    return sum(isinstance(m, JobFinished) for m in seen)


async def test_shift_p_hands_the_core_a_profiled_plan_and_a_a_plain_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`P` asks the study service for a profiled A/B (the spec says so) and, where the
    service cannot take it, runs one in the TUI; `a` asks for a plain one."""
    plans: list[ABPlan] = []
    specs: list[ABJobSpec] = []
    titles: list[str] = []
    report = build_report(_profiled_ab(), study="t", objective="output_throughput")

    async def execute(plan: ABPlan, *_: object) -> object:
        plans.append(plan)
        return report

    def no_service(spec: ABJobSpec, folder: Path) -> None:
        specs.append(spec)
        raise ServiceError("no study service in this test")

    monkeypatch.setattr(lab_run, "execute", execute)
    monkeypatch.setattr(detached, "submit", no_service)
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        await settle(pilot)
        jobs = app.jobs
        monkeypatch.setattr(jobs, "study", lambda: _baseline(app.session.study))
        begin = jobs.host.begin

        def begin_and_keep(title: str, *rest: Any) -> object:
            titles.append(title)
            return begin(title, *rest)

        monkeypatch.setattr(jobs.host, "begin", begin_and_keep)
        monkeypatch.setattr(type(jobs), "detaches", property(lambda _: True))
        await pilot.press("P")
        await wait_for(pilot, lambda: _ended(seen) == 1, 30, "the profiled A/B")
        await pilot.press("a")
        await wait_for(pilot, lambda: _ended(seen) == 2, 30, "the plain A/B")
    assert [s.profile for s in specs] == [True, False]
    assert specs[0].plan().profile and not specs[1].plan().profile
    assert [p.profile for p in plans] == [True, False]  # the fall-back in the TUI, as asked
    assert titles[0].endswith(", profiled") and "profiled" not in titles[1]


class PanelHost(App[None]):
    def compose(self) -> ComposeResult:
        yield RunPanel(id="run")


async def test_the_run_panel_shows_the_profiling_window_after_measuring() -> None:
    async with PanelHost().run_test(size=(80, 24)) as pilot:
        panel = pilot.app.query_one(RunPanel)
        panel.begin("A/B vs 1234abcd ×3, profiled", ("A1", "B1", "B2", "A2", "A3", "B3"), "ab")
        panel.stage("measuring", "CPU_ATTN")
        panel.stage("profiling", "CPU_ATTN")
        await pilot.pause()
        line = " ".join(shown_lines(pilot.app.query_one("#run-stage")))
        log = " ".join(s.text for s in pilot.app.query_one("#run-log", RichLog).lines)
    assert "measuring → profiling" in line and "starting" not in line.split("→")[-1], line
    assert "profiling: one wave after the measured run" in " ".join(log.split())


def test_the_stage_line_draws_profiling_only_when_it_happens() -> None:
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
    assert ABJobSpec.from_dict(spec.to_dict()) == spec  # the round trip loses nothing
    older = _spec()
    del older["profile"]  # a spec an older tunelab wrote
    assert not ABJobSpec.from_dict(older).profile
    assert not ABJobSpec.from_dict(older).plan().profile
    for wrong in ("yes", 1, None):
        with pytest.raises(JobSpecError, match="profile must be true or false"):
            ABJobSpec.from_dict(_spec(profile=wrong))
