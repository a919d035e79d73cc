"""The study machinery under real processes: two workers on one study, kill -9 and resume.

The engine is not under test here, so these use the study engine double
(tests/support/study_engine_double.py) through the real CLI
(tests/support/study_cli.py = ``tunelab`` with the double as its engine).
Everything else is real: the CLI, the Optuna RDB storage shared by separate
processes, the trial stores, the engine lifecycle and its reaper.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
FAST = [
    "--model",
    "engine-double",
    "--input-len",
    "16",
    "--output-len",
    "16",
    "--num-prompts",
    "16",
    "--concurrency",
    "8",
    "--warmup",
    "0",
]


def _cli(args: list[str], home: Path, start_log: Path, **env: str) -> subprocess.Popen[str]:
    environ = {
        **os.environ,
        "TUNELAB_HOME": str(home),
        "DOUBLE_START_LOG": str(start_log),
        "COLUMNS": "200",
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.study_cli", *args],
        cwd=REPO,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _starts(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _optuna_study(url: str, study: str):  # type: ignore[no-untyped-def]
    import optuna

    from tuner.studies.search import sqlalchemy_url

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(sqlalchemy_url(url))
    return optuna.load_study(study_name=study, storage=storage)


def _optuna_trials(url: str, study: str) -> list:
    return _optuna_study(url, study).get_trials(deepcopy=False)


def _store_trials(home: Path, study: str) -> list:
    from tuner.trials.store import TrialStore

    with TrialStore(home / "data" / "tunelab.db") as store:
        return store.list(study)


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_storage(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The study's storage: a SQLite file, and a real PostgreSQL server where one is installed."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared-optuna.db'}"
        return
    from tests.support.postgres_server import PostgresServer, available

    why = available()
    if why:
        pytest.skip(why)
    server = PostgresServer().start()
    try:
        yield server.url
    finally:
        server.stop()


def test_two_workers_share_one_study_without_losing_or_repeating_a_trial(
    tmp_path: Path, shared_storage: str
) -> None:
    url = shared_storage
    log = tmp_path / "starts.jsonl"
    args = [
        "tune",
        "--param",
        "max-num-seqs=1,2,4,8,16",
        "--param",
        "DOUBLE_TOKEN_MS=1,2,3",
        "--allow-env",  # the double's speed knob is no variable tunelab knows to be data
        "DOUBLE_TOKEN_MS",
        "--trials",
        "4",
        "--study",
        "shared",
        "--storage",
        url,
        "--json",
        *FAST,
    ]
    homes = [tmp_path / "node-a", tmp_path / "node-b"]  # two "nodes": separate trial stores
    workers = [_cli(args, home, log) for home in homes]
    results = [_finish(w) for w in workers]
    for code, _out, err in results:
        assert code == 0, err[-2000:]
    reports = [json.loads(out) for _, out, _ in results]
    assert [r["measured"] for r in reports] == [4, 4]

    frozen = _optuna_trials(url, "shared")
    import optuna

    assert len(frozen) == 8
    assert sorted(t.number for t in frozen) == list(range(8))
    assert all(t.state is optuna.trial.TrialState.COMPLETE for t in frozen)
    linked = [t.user_attrs["tunelab_trial_id"] for t in frozen]
    assert len(set(linked)) == 8, "an Optuna trial was linked to a tunelab trial twice"

    stored = {t.id: t for home in homes for t in _store_trials(home, "shared")}
    assert set(stored) == set(linked), "a trial was lost between Optuna and the stores"
    for t in frozen:
        trial = stored[t.user_attrs["tunelab_trial_id"]]
        assert str(trial.status) == "done"
        assert trial.tags["optuna_number"] == t.number
        assert trial.config.engine["max-num-seqs"] == t.params["max-num-seqs"]
        assert t.values[0] == pytest.approx(trial.results["output_throughput"])
    # One engine per trial: nothing was run twice.
    assert len(_starts(log)) == 8
    # optuna-dashboard shows named objectives and what the study measures (its own reader).
    from optuna_dashboard import get_note

    shared = _optuna_study(url, "shared")
    assert shared.metric_names == ["output_throughput"]
    note = get_note(shared)
    assert "`output_throughput`" in note and "`max-num-seqs`" in note
    assert "`DOUBLE_TOKEN_MS`" in note and "engine-double" in note
    assert not set(reports[0]["trials"]) & set(reports[1]["trials"])


def test_sigkill_mid_study_then_resume(tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = tmp_path / "starts.jsonl"
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    slow = [
        "--model",
        "engine-double",
        "--input-len",
        "8",
        "--output-len",
        "32",
        "--num-prompts",
        "8",
        "--concurrency",
        "1",
        "--warmup",
        "0",
    ]
    base = ["tune", "--param", "max-num-seqs=1,2,4", "--study", "k", "--storage", url, *slow]
    # ~8 requests x 32 tokens x 10 ms = 2.6 s of measuring per trial.
    proc = _cli([*base, "--trials", "3"], home, log, DOUBLE_TOKEN_MS="10")
    deadline = time.monotonic() + 120
    while len(_starts(log)) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    assert len(_starts(log)) == 2, "the second trial never started"
    time.sleep(1.0)  # the second trial is measuring now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    engine_pid = _starts(log)[1]["pid"]
    # No orphan engine: the engine's reaper ends it once tunelab is gone.
    gone_by = time.monotonic() + 15
    while psutil.pid_exists(engine_pid) and time.monotonic() < gone_by:
        try:
            if psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    alive = (
        psutil.pid_exists(engine_pid)
        and psutil.Process(engine_pid).status() != psutil.STATUS_ZOMBIE
    )
    assert not alive, f"engine {engine_pid} outlived the killed tunelab"

    # Re-run: the study resumes; the killed point is marked, the finished one kept.
    code, out, err = _finish(
        _cli([*base, "--trials", "2", "--json"], home, log, DOUBLE_TOKEN_MS="1")
    )
    assert code == 0, err[-2000:]
    report = json.loads(out)
    assert report["recovered"] == [1]
    assert report["measured"] == 2

    import optuna

    frozen = sorted(_optuna_trials(url, "k"), key=lambda t: t.number)
    states = [t.state for t in frozen]
    assert states == [
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.FAIL,
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.COMPLETE,
    ]
    assert frozen[1].user_attrs.get("interrupted") is True
    stored = {t.id: t for t in _store_trials(home, "k")}
    killed = stored[frozen[1].user_attrs["tunelab_trial_id"]]
    assert str(killed.status) == "interrupted"
    assert "interrupted" in (killed.failure_reason or "")
    first = stored[frozen[0].user_attrs["tunelab_trial_id"]]
    assert str(first.status) == "done" and first.results
    # `tunelab winner` reads the resumed study and ignores the interrupted trial.
    code, out, err = _finish(_cli(["winner", "--study", "k", "--json"], home, log))
    assert code == 0, err
    assert json.loads(out)["excluded"] == {"not finished": 1}
