"""The compare view against the core: one-piece responses (issue 13 B9) and the drift guard (16).

The view is pushed in a bare app over a real :class:`tuner.lab.study.Study`
of real ``Trial`` objects; every expectation is the core's own answer
(``delivery_warning``, ``Study.compare``, ``ab_guard``), read off the screen.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.widgets import DataTable

from tests.support.tui_harness import wait_for
from tests.test_guard import BASE, _probe, _run
from tui.screens.compare import CompareScreen
from tuner.bench.metrics import delivery_warning
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.lab.study import Study
from tuner.trials.guard_check import ab_guard
from tuner.trials.model import Trial, TrialStatus

STREAMED = {
    "output_throughput": 800.0,
    "request_throughput": 3.0,
    "median_ttft_ms": 40.0,
    "p99_ttft_ms": 50.0,
    "median_tpot_ms": 9.0,
    "p99_tpot_ms": 11.0,
    "median_itl_ms": 9.0,
    "p99_itl_ms": 12.0,
}
# Every response in one piece: TPOT/ITL read 0 (a starved API server), TTFT is the whole latency.
ONE_PIECE = {
    **STREAMED,
    "output_throughput": 900.0,
    "median_tpot_ms": 0.0,
    "p99_tpot_ms": 0.0,
    "median_itl_ms": 0.0,
    "p99_itl_ms": 0.0,
    "tunelab": {"one_chunk_fraction": 1.0},
}
DRIFTED = _run(_probe("a", [5, 6, 99, 98], [-0.1, -0.2, -0.3, -0.4]), BASE.probes[1])


def _trial(seqs: int, results: dict[str, Any], guard: dict[str, Any] | None = None) -> Trial:
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": seqs}),
        workload=Workload(input_len=16, output_len=8, num_prompts=4, concurrency=2),
        study="t",
        status=TrialStatus.DONE,
        results=results,
        guard=guard,
    )


def _cells(table: DataTable[Any], key: str) -> list[str]:
    return [str(getattr(c, "plain", c)) for c in table.get_row(key)]


async def test_one_piece_tpot_and_itl_say_so_instead_of_zero_and_minus_100() -> None:
    a, b = _trial(8, dict(STREAMED)), _trial(2, dict(ONE_PIECE))
    warning = delivery_warning(b.results or {}, short=True)
    assert warning is not None and delivery_warning(a.results or {}, short=True) is None
    study = Study(None, "t", [a, b])
    app: App[None] = App()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = CompareScreen(study)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.comparison is not None, 10, "the comparison")
        await pilot.pause()
        table = screen.query_one(DataTable)
        report = screen.comparison.report  # type: ignore[union-attr]
        for metric in ("median_itl_ms", "p99_itl_ms", "median_tpot_ms", "p99_tpot_ms"):
            a_cell, b_cell, rel, verdict = _cells(table, metric)[1:]
            assert "one piece" in b_cell and not b_cell.startswith("0"), (metric, b_cell)
            assert a_cell.startswith("9") or a_cell.startswith("1"), (metric, a_cell)
            assert "-100" not in rel and "one piece" in rel, (metric, rel)
            assert verdict == "no verdict"
        # Metrics that still hold keep the core's numbers and verdict.
        row = next(r for r in report.rows if r.metric == "median_ttft_ms")
        assert _cells(table, "median_ttft_ms")[4] == str(row.verdict)
        note = str(screen.query_one("#compare-note").render())
        assert f"B: {warning}" in note and report.summary() in note


async def test_guard_verdict_is_the_cores_ab_guard() -> None:
    a = _trial(8, dict(STREAMED), BASE.to_dict())
    b = _trial(2, {**STREAMED, "output_throughput": 950.0}, DRIFTED.to_dict())
    study = Study(None, "t", [a, b])
    app: App[None] = App()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = CompareScreen(study)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.comparison is not None, 10, "the comparison")
        await pilot.pause()
        found = screen.comparison
        assert found is not None
        expected = ab_guard(found.a, found.b, a).summary()
        assert "drifted" in expected  # the core's verdict on these outputs
        note = str(screen.query_one("#compare-note").render())
        assert expected in note


async def test_a_cursor_on_the_baselines_config_is_named_not_silently_replaced() -> None:
    a, a2, b = _trial(8, dict(STREAMED)), _trial(8, dict(STREAMED)), _trial(2, dict(STREAMED))
    study = Study(None, "t", [a, a2, b])
    app: App[None] = App()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = CompareScreen(study, b_id=a2.id)  # the cursor on a repeat of A's config
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.comparison is not None, 10, "the comparison")
        await pilot.pause()
        said = study.pick_reason(a, a2.id, b)
        assert said is not None and screen.pick_reason == said
        title = " ".join(str(screen.query_one("#compare-title").render()).split())
        assert f"⚠ {said}" in title and f"B {b.short_id}" in title
    # With the cursor on B itself there is nothing to explain.
    app2: App[None] = App()
    async with app2.run_test(size=(120, 30)) as pilot:
        plain = CompareScreen(study, b_id=b.id)
        await app2.push_screen(plain)
        await wait_for(pilot, lambda: plain.comparison is not None, 10, "the comparison")
        assert plain.pick_reason is None
        assert "⚠" not in str(plain.query_one("#compare-title").render())
