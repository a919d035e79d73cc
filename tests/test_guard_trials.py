"""Drift guard wired into trials: store column, runner option, baseline lookup, show output."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import typer
from typer.testing import CliRunner

from tests.test_guard import BASE, _probe, _run
from tests.test_trials_runner import CPU, REPO, double, trial
from tuner.cli.app import register_all
from tuner.guard import Verdict
from tuner.lab.study import Study
from tuner.trials.guard_check import baseline_trial, guard_reference, trial_verdict
from tuner.trials.model import TrialStatus
from tuner.trials.runner import run_trial
from tuner.trials.store import TrialStore

DRIFTED = _run(_probe("a", [5, 6, 99, 98], [-0.1, -0.2, -0.3, -0.4]), BASE.probes[1])


def _done(store: TrialStore, guard: dict | None, study: str = "s"):
    t = trial()
    t.study = study
    t.guard = guard
    store.add(t)
    return store.save_result(t, {"output_throughput": 10.0, "completed": 12})


def test_store_keeps_guard_and_migrates_a_version_4_store(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with TrialStore(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE trials DROP COLUMN guard")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    with TrialStore(path) as store:
        t = _done(store, BASE.to_dict())
        assert store.get(t.id).guard == BASE.to_dict()


def test_verdict_against_the_study_baseline(tmp_path: Path) -> None:
    with TrialStore(tmp_path / "t.db") as store:
        base = _done(store, BASE.to_dict())
        cand = _done(store, DRIFTED.to_dict())
        bare = _done(store, None)
        found = Study(store, "s").baseline()
        assert found is not None and found.trial.id == base.id
        v = trial_verdict(found.trial, store.get(cand.id))
        assert v is not None and v.verdict is Verdict.DRIFTED
        assert trial_verdict(found.trial, bare) is None
        # The runner scores the baseline's tokens teacher-forced; never a trial against itself.
        ref = guard_reference(store, cand)
        assert ref is not None and ref[0] == base.id and ref[1].probes[0].token_ids == [5, 6, 7, 8]
        assert guard_reference(store, base) is None
        # The runner's baseline rule agrees with tuner.lab.study's, marked or first.
        assert baseline_trial(store, "s").id == found.trial.id
        Study(store, "s").mark_baseline(cand.id)
        assert baseline_trial(store, "s").id == Study(store, "s").baseline().trial.id == cand.id


def test_show_prints_the_guard_verdict(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        base = _done(store, BASE.to_dict())
        cand = _done(store, DRIFTED.to_dict())
    app = register_all(typer.Typer())
    out = CliRunner().invoke(app, ["show", cand.id, "--store", str(db)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert f"Output guard vs baseline {base.short_id}: drifted on 1/2 prompts from token 2" in (
        out.output
    )
    out = CliRunner().invoke(app, ["show", base.id, "--store", str(db)], env={"COLUMNS": "200"})
    assert "this trial is the study's baseline (2 probes)" in out.output


async def test_runner_records_the_guard_and_can_skip_it(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    on = await run_trial(
        trial(num_prompts=4), store, context=CPU, engine_command=double(), engine_cwd=str(REPO)
    )
    assert on.status is TrialStatus.DONE
    assert on.guard is not None and "guard_s" in on.timings
    # The double streams SSE even when asked for JSON: the guard says so; the trial stays done.
    assert "non-JSON" in (on.guard["error"] or "")
    assert store.get(on.id).guard == on.guard
    off = await run_trial(
        trial(num_prompts=4),
        store,
        context=CPU,
        engine_command=double(),
        engine_cwd=str(REPO),
        guard=False,
    )
    assert off.status is TrialStatus.DONE and off.guard is None and "guard_s" not in off.timings


def test_one_baseline_rule_for_the_study_and_the_guard(tmp_path: Path) -> None:
    """choose_baseline is the rule; Study.baseline and the runner's reference both use it."""
    from tuner.lab.study import BaselineChoice
    from tuner.trials.guard_check import choose_baseline

    with TrialStore(tmp_path / "t.db") as store:
        first = _done(store, BASE.to_dict())
        second = _done(store, DRIFTED.to_dict())
        unfinished = trial()
        unfinished.study = "s"
        store.add(unfinished)
        trials = store.list(study="s")
        assert choose_baseline(trials, None) == (first, False)
        assert choose_baseline(trials, second.id) == (second, True)
        # A marked trial without results gives way to the first finished one.
        assert choose_baseline(trials, unfinished.id) == (first, False)
        assert choose_baseline([unfinished], None) is None
        store.set_study_setting("s", "baseline", unfinished.id)
        found = Study(store, "s").baseline()
        assert found is not None and found.trial.id == first.id
        assert found.how is BaselineChoice.FIRST
        ref = guard_reference(store, second)
        assert ref is not None and ref[0] == first.id
