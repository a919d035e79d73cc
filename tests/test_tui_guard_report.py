"""The drift guard in the results table, the report key, and a failing worker (issues 16, 13).

Each expectation is the core's answer: ``Study.guards`` for the table's guard
column, ``tuner.report.write_report``'s files for ``p``, and
``tuner.crash``'s report file for a worker that raised.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult

from tests.support.tui_harness import services, wait_for
from tests.test_guard import BASE
from tests.test_tui_compare import DRIFTED, STREAMED, _trial
from tui.app import TunelabApp
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.results_table import ResultsTable
from tuner import paths
from tuner.lab.study import Study
from tuner.trials.store import TrialStore


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ResultsTable()


async def test_results_table_guard_column_is_the_studys_verdict() -> None:
    a = _trial(8, dict(STREAMED), BASE.to_dict())
    b = _trial(2, dict(STREAMED), DRIFTED.to_dict())
    bare = _trial(4, dict(STREAMED))
    study = Study(None, "t", [a, b, bare])
    guards = study.guards()
    assert [guards[t.id].label() for t in (a, b, bare)] == ["baseline", "drifted", "—"]
    app = _Host()
    async with app.run_test(size=(100, 24)) as pilot:
        table = app.query_one(ResultsTable)
        baseline = study.baseline()
        assert baseline is not None
        table.show(study.trials(), baseline.trial.id, guards)
        await wait_for(pilot, lambda: table.row_count == 3, 5, "rows")
        # Under 120 columns the guard is in each row's detail line (issue 32's 80×24 layout).
        keys = [c.key.value for c in table.ordered_columns]
        assert keys[-1] == "config" and "guard" not in keys
        for trial in (a, b, bare):
            assert f"guard {guards[trial.id].label()}" in table.details[trial.id].plain
        # With the room for it, the guard has its column.
        await pilot.resize_terminal(160, 24)
        await pilot.pause()
        table.show(study.trials(), baseline.trial.id, guards)
        await pilot.pause()
        keys = [c.key.value for c in table.ordered_columns]
        assert keys[-1] == "config" and "guard" in keys
        for row, trial in enumerate((a, b, bare)):
            cell = table.get_row_at(row)[keys.index("guard")]
            assert str(getattr(cell, "plain", cell)) == guards[trial.id].label()


async def test_p_writes_the_study_report_off_the_event_loop_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store_path = tmp_path / "trials.db"
    with TrialStore(store_path) as store:
        for seqs, results in ((8, STREAMED), (2, {**STREAMED, "output_throughput": 900.0})):
            t = replace(_trial(seqs, {}), study="tui", results=None)
            store.add(t)
            store.save_result(t, dict(results))
    app = TunelabApp(services=replace(services(), store_path=store_path))
    notes: list[str] = []
    app.notify = lambda message, **_k: notes.append(str(message))  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("p")
        await wait_for(pilot, lambda: getattr(app, "last_report", None) is not None, 120, "report")
        written: Any = app.last_report
        await wait_for(pilot, lambda: any(str(written.html) in n for n in notes), 10, "the note")
        # tunelab's own folder for the study, never the directory it was started in.
        assert written.html.parent == paths.reports_dir("tui")
        assert written.html.parent.is_relative_to(paths.data_dir())
        assert not (tmp_path / "tunelab-report").exists() and not list(tmp_path.glob("*.html"))
        assert written.html.is_file() and written.markdown.is_file()
        assert written.trials == 2
        assert app.is_running  # the app went on while the report was written


def _broken_telemetry() -> Any:
    raise RuntimeError("driver exploded")


async def test_a_failing_worker_says_so_with_a_crash_file_and_the_app_goes_on() -> None:
    app = TunelabApp(services=replace(services(), telemetry=_broken_telemetry))
    notes: list[str] = []
    app.notify = lambda message, **_k: notes.append(str(message))  # type: ignore[method-assign]
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(getattr(app, "crash_reports", [])), 20, "crash report")
        path = app.crash_reports[0]
        assert path.is_file() and "driver exploded" in path.read_text()
        assert any(str(path) in n and "driver exploded" in n for n in notes), notes
        panel = app.main.query_one(GpuPanel)
        line = str(panel.query_one("#gpu-none").render())
        assert "telemetry failed" in line and "starting" not in line
        assert app.session.gpu_count == 0 and app.is_running


def test_a_config_loaded_before_the_main_screen_composed_does_not_crash() -> None:
    """CI once saw the start config arrive before MainScreen had its panels (NoMatches crash)."""
    from tui.screens.main import MainScreen

    app = TunelabApp(services=services())
    screen = MainScreen(app.session, lambda _job: None)  # not composed: no panels yet
    assert not screen.query("ModelPanel")
    screen.refresh_all()  # nothing to render into: on_mount renders the session later
