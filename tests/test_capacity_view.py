"""Capacity probes as a first-class view (issue 32): load and ✓/✗, grouped, kept apart, kept on stop.

One capacity search on the study engine double (tests/support/study_engine_double.py:
the capacity at ``p99_ttft_ms<=200`` is max-num-seqs) is stopped as launch 2
begins. What the faces show is then checked against what the core returned:

- the store keeps launch 1's probes and no trial for a probe that never ran;
- :func:`capacity_steps` reads launch 1's capacity back from the stored probes,
  equal to the search's own answer for that launch;
- a probe is never the baseline, a point of the Pareto front, a member of a pooled
  arm or a winner, and the report lists it under "Capacity", not against the baseline;
- the Results table shows the launch's row (its capacity) above its probes, each
  probe with its load and ✓/✗ and no Δ; ``b``/``c`` on those rows do not treat
  them as a config's trial; the Run panel's probe line is the core's.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable

from tests.support.study_cli import double_command
from tui.screens.compare import CompareScreen
from tui.screens.main import result_line
from tui.screens.results import ResultsScreen
from tui.widgets.results_table import STEP_KEY
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.lab.study import Study
from tuner.report.data import collect
from tuner.report.markdown import render_markdown
from tuner.rules import Target
from tuner.studies.capacity import Grid, LaunchCapacity
from tuner.studies.capacity_run import run_capacity
from tuner.studies.capacity_steps import capacity_steps, probe_view
from tuner.studies.executor import TrialRunner
from tuner.studies.slo import parse_slo
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

SLO = parse_slo("p99_ttft_ms<=200")
BASE = Workload(input_len=16, output_len=16, num_prompts=4, warmup_requests=0)
SEQS = 3
PROBES = 6


def _stopped_search(tmp_path: Path) -> tuple[Path, LaunchCapacity]:
    """A 2-launch search stopped as launch 2 starts; returns the store and launch 1's answer."""
    config = EngineConfig(model="engine-double", engine={"max-num-seqs": SEQS})
    path = tmp_path / "trials.db"
    answers: list[LaunchCapacity] = []

    async def search() -> None:
        with TrialStore(path) as store:
            context = RunContext(Target(note="study engine double"), None, [])
            runner = TrialRunner(
                store, None, {"startup_timeout": 60, "context": context}, double_command
            )
            task = asyncio.current_task()
            assert task is not None

            def on_launch(answer: LaunchCapacity) -> None:
                answers.append(answer)
                asyncio.get_running_loop().call_soon(task.cancel)  # the user's stop

            with pytest.raises(asyncio.CancelledError):
                await run_capacity(
                    config,
                    BASE,
                    SLO,
                    Grid("concurrency", 1, 1, 16),
                    runner,
                    launches=2,
                    probes=PROBES,
                    study="cap",
                    on_launch=on_launch,
                )

    asyncio.run(search())
    assert len(answers) == 1
    return path, answers[0]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LaunchCapacity]:
    tmp = tmp_path_factory.mktemp("capacity-view")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOUBLE_TOKEN_MS", "25")
        mp.setenv("TUNELAB_HOME", str(tmp / "home"))
        return _stopped_search(tmp)


def _with_a_config_trial(path: Path) -> Trial:
    """A finished run of another config in the same study, stored after the search."""
    source = TrialStore(path).list(study="cap")[0]
    assert source.results is not None
    trial = Trial(
        config=EngineConfig(model="engine-double", engine={"max-num-seqs": 8}),
        workload=BASE,
        study="cap",
    )
    with TrialStore(path) as store:
        store.add(trial)
        store.save_result(trial, dict(source.results))
    return trial


def test_a_stop_keeps_the_finished_launch_and_no_unstarted_probe(
    stopped: tuple[Path, LaunchCapacity],
) -> None:
    path, answer = stopped
    with TrialStore(path) as store:
        trials = store.list(study="cap")
    # Launch 2's probes never ran: none is left behind as "interrupted".
    assert {t.repeat for t in trials} == {0}, [(t.repeat, t.status) for t in trials]
    assert len(trials) == PROBES and all(t.status is TrialStatus.DONE for t in trials)
    (step,) = capacity_steps(trials)
    # The stored probes give back what the search itself answered for launch 1.
    assert (step.capacity, step.failing, step.converged) == (
        answer.capacity,
        answer.failing,
        answer.converged,
    )
    assert step.capacity == SEQS
    by_id = {p.trial.id: p for p in step.probes}
    assert [by_id[p.trial_id].met for p in answer.probes] == [p.met for p in answer.probes]
    assert [by_id[p.trial_id].load for p in answer.probes] == [p.value for p in answer.probes]
    assert step.summary().startswith(
        f"capacity L1 at {SLO}: {SEQS} users ({SEQS + 1} users missed)"
    )


def _copy(path: Path, to: Path) -> Path:
    """The search's store, copied, for a test that adds trials (the others read the original)."""
    with sqlite3.connect(path) as src, sqlite3.connect(to) as dst:
        src.backup(dst)
    return to


def test_probes_are_never_compared_as_configs(
    stopped: tuple[Path, LaunchCapacity], tmp_path: Path
) -> None:
    path = _copy(stopped[0], tmp_path / "trials.db")
    with TrialStore(path) as store:
        study = Study(store, "cap")
        # Only probes: no baseline, no winner (and the reason says why).
        assert study.baseline() is None
        pick = study.winner()
        assert pick.report is None and pick.error is not None
        assert f"{PROBES} capacity probes" in pick.error
    run = _with_a_config_trial(path)
    with TrialStore(path) as store:
        study = Study(store, "cap")
        base = study.baseline()
        assert base is not None and base.trial.id == run.id
        probe = next(t for t in study.trials() if t.is_probe)
        assert study.pick_other(run, probe.id) is None  # a probe is no config to compare
        assert "capacity probe" in (study.pick_reason(run, probe.id, run) or "")
        data = collect(study)
        rows = {r.trial.id: r for r in data.rows}
        assert all(not rows[t.id].changes for t in study.trials() if t.is_probe)
        assert [p.label for p in data.fronts["p99_ttft_ms"]] == [rows[run.id].label]
        text = render_markdown(data)
        assert data.objective == "output_throughput"  # the run's, not the probes' SLO key
        capacity = text[text.index("## Capacity") :]
        assert f"{SEQS} users ({SEQS + 1} users missed)" in capacity.splitlines()[2]


async def test_results_show_the_launch_above_its_probes(
    stopped: tuple[Path, LaunchCapacity],
) -> None:
    path, _ = stopped
    store = TrialStore(path)
    study = Study(store, "cap")
    trials = study.trials()
    (step,) = study.capacity_steps(trials)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ResultsScreen(study))

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ResultsScreen)
        table = screen.query_one(DataTable)
        keys = [row.key.value for row in table.ordered_rows]
        first = step.trial_ids[0]
        assert keys.index(STEP_KEY + first) == keys.index(first) - 1
        head = table.get_row(STEP_KEY + first)
        cell = str(head[-1])
        assert cell == step.summary() or step.summary().startswith(cell.rstrip("…"))
        assert table.details[STEP_KEY + first].plain == step.summary()  # whole in the detail
        for view in step.probes:
            cells = [str(c) for c in table.get_row(view.trial.id)]
            assert cells[-1] == view.cell()
            assert f"{view.load:g} user" in cells[-1] and view.mark in cells[-1]
            assert cells[0] == "" and cells[4] == "" and cells[6] == ""  # no ★, no Δ
        # b on a probe: a warning, no baseline kept.
        table.move_cursor(row=keys.index(first))
        await pilot.press("b")
        await pilot.pause()
        assert study.baseline() is None
        # c on the launch's row opens no comparison.
        table.move_cursor(row=keys.index(STEP_KEY + first))
        await pilot.press("c")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
    store.close()


def test_the_run_panel_line_of_a_probe_is_the_core_s(stopped: tuple[Path, LaunchCapacity]) -> None:
    path, _ = stopped
    with TrialStore(path) as store:
        probe = store.list(study="cap")[0]
    view = probe_view(probe)
    assert view is not None and view.met is not None
    line = result_line(probe)
    assert line == f"trial {probe.short_id} {view.line()}"
    assert f"{view.load:g} user" in line and "p99_ttft_ms" in line and "(<= 200)" in line


def test_cli_results_name_each_probe_s_load_and_verdict(
    stopped: tuple[Path, LaunchCapacity],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tuner.cli.trials import _print_table

    monkeypatch.setenv("COLUMNS", "250")
    path, _ = stopped
    with TrialStore(path) as store:
        trials = store.list(study="cap")
    _print_table(trials, path, "cap", {})
    out = capsys.readouterr().out
    for trial in trials:
        view = probe_view(trial)
        assert view is not None
        (row,) = [line for line in out.splitlines() if trial.short_id in line]
        assert view.cell() in row, row
