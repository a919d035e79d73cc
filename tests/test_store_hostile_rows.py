"""A store with bad or hostile rows: the good rows still show, the bad ones are named (issue 19).

Rows are corrupted with plain SQLite, as a crash, a newer tunelab or a
hand-edited file would leave them; hostile names and knob values (Rich
markup, terminal escapes) go through the real CLI output.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli import studies as studies_cli
from tuner.cli import trials as trials_cli
from tuner.cli.safe_text import clean, markup
from tuner.config import EngineConfig
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import StoreError, TrialStore

RESULTS = {"completed": 4, "failed": 0, "output_throughput": 111.5, "p99_ttft_ms": 9.0}


def store_cli() -> typer.Typer:
    """The commands that read the store (results, show, ... winner, ab --report)."""
    app = typer.Typer()
    trials_cli.register(app)
    studies_cli.register(app)
    return app


@pytest.fixture
def app() -> typer.Typer:
    return store_cli()


def _invoke(app: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def _trial(study: str = "s", **engine: object) -> Trial:
    return Trial(
        EngineConfig(model="org/m", engine={"max-num-seqs": 8, **engine}),
        Workload(input_len=8, output_len=8, num_prompts=4),
        study=study,
    )


def _done(store: TrialStore, trial: Trial) -> Trial:
    store.add(trial)
    return store.save_result(trial, RESULTS)


def _corrupt(db: Path, trial_id: str, column: str, value: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(f"UPDATE trials SET {column} = ? WHERE id = ?", (value, trial_id))
    conn.close()


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Path, Trial, dict[str, str]]:
    """One good trial, one from a newer tunelab (extra fields), three unreadable ones."""
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        good = _done(store, _trial())
        newer = _done(store, _trial(**{"max-num-batched-tokens": 512}))
        bad = {name: _done(store, _trial()).id for name in ("json", "status", "config")}
    conn = sqlite3.connect(db)
    wl = json.loads(
        conn.execute("SELECT workload FROM trials WHERE id = ?", (newer.id,)).fetchone()[0]
    )
    conn.close()
    wl["future_knob"] = {"nested": True}  # what a newer tunelab might write
    _corrupt(db, newer.id, "workload", json.dumps(wl))
    _corrupt(db, newer.id, "config", json.dumps({**newer.config.canonical(), "future": 1}))
    _corrupt(db, bad["json"], "results", "{not json")
    _corrupt(db, bad["status"], "status", "paused-by-tunelab-9")
    _corrupt(db, bad["config"], "config", json.dumps({"model": "--trust-remote-code"}))
    return db, good, {**bad, "newer": newer.id}


def test_scan_keeps_the_good_rows_and_names_the_bad(
    mixed: tuple[Path, Trial, dict[str, str]],
) -> None:
    db, good, ids = mixed
    with TrialStore(db) as store:
        scan = store.scan()
        assert [t.id for t in scan.trials] == [good.id, ids["newer"]]
        newer = scan.trials[1]
        assert newer.config.engine["max-num-batched-tokens"] == 512  # known fields kept
        reasons = {b.id: b.reason for b in scan.bad}
        assert set(reasons) == {ids["json"], ids["status"], ids["config"]}
        assert "bad JSON" in reasons[ids["json"]]
        assert "paused-by-tunelab-9" in reasons[ids["status"]]
        assert [t.id for t in store.list()] == [good.id, ids["newer"]]
        assert store.get(good.id).status is TrialStatus.DONE
        with pytest.raises(StoreError, match="cannot be read"):
            store.get(ids["json"])
        assert store.recover() == []  # recovery walks past them too


def test_results_cli_shows_good_rows_and_warns_about_bad(
    app: typer.Typer, mixed: tuple[Path, Trial, dict[str, str]]
) -> None:
    db, good, ids = mixed
    code, out, err = _invoke(app, "results", "--store", str(db))
    assert code == 0
    assert good.short_id in out and ids["newer"][:8] in out and "111.5" in out
    warning = next(line for line in err.splitlines() if line.startswith("warning:"))
    assert "3 unreadable row(s)" in warning
    assert all(ids[k] in warning for k in ("json", "status", "config"))

    code, out, err = _invoke(app, "results", "--json", "--store", str(db))
    assert code == 0
    assert [d["id"] for d in json.loads(out)] == [good.id, ids["newer"]]
    listed = json.loads(err.splitlines()[-1])["unreadable_rows"]
    assert {b["id"] for b in listed} == {ids["json"], ids["status"], ids["config"]}


def test_show_of_a_bad_row_is_a_one_line_error(
    app: typer.Typer, mixed: tuple[Path, Trial, dict[str, str]]
) -> None:
    db, _, ids = mixed
    code, out, err = _invoke(app, "show", ids["status"], "--store", str(db))
    assert code == 2
    assert "cannot be read" in err and "Traceback" not in out + err


HOSTILE = ["x[/]y", "[/]x", "[bold red]boom", "a\x1b[2J\x1b]0;pwned\x07b", "tail\\"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_study_names_and_knob_values_print_literally(
    app: typer.Typer, tmp_path: Path, name: str
) -> None:
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        trial = _trial(study=name, **{"served-model-name": name})
        trial.backend_actual = name
        trial.failure_reason = f"reason {name}"
        _done(store, trial)
    shown = clean(name)
    for args in (
        ["results", "--store", str(db)],
        ["results", "--study", name, "--store", str(db)],
        ["show", trial.id, "--store", str(db)],
        ["winner", "--study", name, "--store", str(db)],
    ):
        code, out, err = _invoke(app, *args)
        assert code == 0, (args, out, err)
        assert "\x1b" not in out, args  # no terminal escape reaches the screen
        flat = out.replace("\n", "")
        assert shown.rstrip("\\") in flat or shown[:4] in flat, (args, out)
    _, out, _ = _invoke(app, "show", trial.id, "--store", str(db))
    assert f"served-model-name={shown.rstrip(chr(92))}" in out


def test_markup_and_clean() -> None:
    assert clean("a\x9b2Jb") == "ab"
    assert clean("a\x1b[31mred\x1b[0m") == "ared"
    assert clean("a\x1b]0;title\x07b") == "ab"
    assert clean("a\x00\x07\x7fb\tc\nd") == "ab\tc\nd"
    assert markup("x[/]y") == "x\\[/]y"
