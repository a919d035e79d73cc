"""The output guard wherever the CLI shows results: ``results``, ``show --json``, the A/B
report and ``winner`` (``--require-guard``).

Stores are built without an engine (guard records from tests/test_guard.py's
typed model). Every expectation is what the core returns for the same store —
``tuner.trials.guard_check`` against ``tuner.lab.study``'s baseline, and the
study report's own answer — never a copy of the rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.test_guard import BASE
from tests.test_guard_views import B_CONFIG, CLOSE, DRIFTED, _add
from tuner.cli.app import register_all
from tuner.lab.study import Study
from tuner.report import collect
from tuner.studies.ab import build_report
from tuner.studies.winner import pick_winner
from tuner.trials.guard_check import ab_guard, guard_verdicts, require_guard
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

APP = register_all(typer.Typer())


def _invoke(*args: str) -> tuple[int, str, str]:
    out = CliRunner().invoke(APP, list(args), env={"COLUMNS": "250"})
    return out.exit_code, out.stdout, out.stderr


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Study ``s``: an A/B whose A runs match (BASE) and whose B runs are close and drifted;
    study ``t``: one guarded trial (its own baseline) and one drifted against it."""
    path = tmp_path / "t.db"
    with TrialStore(path) as store:
        a = [_add(store, BASE, arm="A", repeat=i, value=10.0 + i) for i in range(2)]
        b = [
            _add(store, CLOSE, arm="B", repeat=0, config=B_CONFIG, value=20.0),
            _add(store, DRIFTED, arm="B", repeat=1, config=B_CONFIG, value=21.0),
        ]
        Study(store, "s").remember_ab(
            build_report([*a, *b], study="s", objective="output_throughput")
        )
        for guard in (BASE, DRIFTED):
            t = _add(store, guard, config=B_CONFIG if guard is DRIFTED else None)
            t.study = "t"
            store.save(t)
    return path


def _core_guards(store: TrialStore, study: str) -> list:  # type: ignore[type-arg]
    base = Study(store, study).baseline()
    return guard_verdicts(store.list(study), base.trial if base else None)


def test_results_table_and_json_show_each_trials_verdict_against_its_studys_baseline(
    db: Path,
) -> None:
    with TrialStore(db) as store:
        expected = {g.trial.id: g for s in ("s", "t") for g in _core_guards(store, s)}
    assert {g.label() for g in expected.values()} >= {"baseline", "same", "close", "drifted"}
    code, out, err = _invoke("results", "--store", str(db))
    assert code == 0, err
    assert "guard" in out
    for trial_id, g in expected.items():
        (row,) = [line for line in out.splitlines() if trial_id[:8] in line]
        cells = [cell.strip() for cell in row.strip().strip("│").split("│")]
        assert cells[-1] == g.label(), row
    code, out, _ = _invoke("results", "--store", str(db), "--json")
    rows = json.loads(out)
    assert len(rows) == len(expected)
    for row in rows:
        g = expected[row["id"]]
        assert row["guard_verdict"] == {
            "verdict": g.label(),
            "summary": g.describe(),
            "baseline": g.baseline_id,
        }
    drifted = next(g for g in expected.values() if g.label() == "drifted")
    code, out, _ = _invoke("show", drifted.trial.id, "--store", str(db), "--json")
    assert code == 0 and json.loads(out)["guard_verdict"]["summary"] == drifted.describe()


def test_ab_report_prints_the_guard_line_the_study_report_shows(db: Path) -> None:
    with TrialStore(db) as store:
        study = Study(store, "s")
        report = study.last_ab()
        assert report is not None
        by_id = {t.id: t for t in study.trials()}
        base = study.baseline()
        arms = ab_guard(
            [by_id[i] for i in report.trials["A"]],
            [by_id[i] for i in report.trials["B"]],
            base.trial if base else None,
        )
        in_report = collect(study).ab_guard
    assert in_report is not None and in_report.summary() == arms.summary()
    assert arms.summary().startswith("outputs: drifted")
    code, out, err = _invoke("ab", "--report", "--study", "s", "--store", str(db))
    assert code == 0, err
    assert arms.summary() in out.splitlines()
    code, out, _ = _invoke("ab", "--report", "--study", "s", "--store", str(db), "--json")
    data = json.loads(out)
    assert data["output_guard"] == {
        "verdict": str(arms.verdict),
        "summary": arms.summary(),
        "reference": arms.reference.id if arms.reference else None,
    }
    assert data["verdict"] == report.to_dict()["verdict"]


def _winner_under(store: TrialStore, require: str | None) -> tuple[Trial, str | None, list]:  # type: ignore[type-arg]
    trials = store.list("s")
    base = Study(store, "s").baseline()
    kept = require_guard(trials, require, base.trial if base else None)  # type: ignore[arg-type]
    point = pick_winner(kept.kept, study="s").winner
    return point.representative(), kept.note(), guard_verdicts(point.trials, base.trial)


@pytest.mark.parametrize("require", [None, "close", "same"])
def test_winner_names_its_guard_verdict_and_require_guard_filters_like_the_core(
    db: Path, require: str | None
) -> None:
    with TrialStore(db) as store:
        named, note, guards = _winner_under(store, require)
    mine = next(g for g in guards if g.trial.id == named.id)
    asked = ["--require-guard", require] if require else []
    code, out, err = _invoke("winner", "--study", "s", "--store", str(db), *asked)
    assert code == 0, err
    assert f"trial {named.short_id} (config" in out
    assert f"trial {named.short_id}: {mine.describe()}" in out
    if note is None:
        assert "--require-guard" not in out
    else:
        assert note in out
    code, out, _ = _invoke("winner", "--study", "s", "--store", str(db), "--json", *asked)
    data = json.loads(out)
    assert data["winner"]["trial"] == named.id
    assert data["output_guard"]["winner"]["summary"] == mine.describe()
    assert data["output_guard"]["require"] == require


def test_require_guard_changes_the_winner_and_a_bad_level_is_refused(db: Path) -> None:
    with TrialStore(db) as store:
        plain, _, _ = _winner_under(store, None)
        strict, note, _ = _winner_under(store, "same")
    # The fixture's fastest config drifted: requiring "same" must pick another one.
    assert plain.config_id != strict.config_id and note is not None
    code, _, err = _invoke("winner", "--study", "s", "--store", str(db), "--require-guard", "x")
    assert code == 2 and "--require-guard" in err
