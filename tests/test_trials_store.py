"""The trial store: round trips, prefixes, schema guard, two writer processes, recovery, export."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import SCHEMA_VERSION, StoreError, TrialNotFound, TrialStore, this_process

REPO = Path(__file__).resolve().parents[1]


def make_trial(study: str = "s", **engine: object) -> Trial:
    cfg = EngineConfig(
        model="org/model", env={"VLLM_ROCM_USE_AITER": "1"}, engine={"max-num-seqs": 8, **engine}
    )
    return Trial(
        cfg, Workload(input_len=32, output_len=16, num_prompts=8, concurrency=4), study=study
    )


RESULTS = {
    "completed": 8,
    "failed": 0,
    "output_throughput": 123.5,
    "p99_ttft_ms": 42.0,
    "request_rate": "inf",
    "tunelab": {"server": {"available": True, "peak_kv_cache_usage": 0.5}},
}


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    trial = make_trial(**{"attention-backend": "ROCM_AITER_FA"})
    trial.tags = {"sweep": "max-num-seqs", "value": 8}
    trial.arm, trial.repeat = "A", 2
    trial.environment = {"vllm_version": "0.32.0", "power_cap_w": 750.0}
    store.add(trial)
    store.update_status(
        trial, TrialStatus.STARTING, started_at=time.time(), log_path="/x/engine.log"
    )
    store.save_result(
        trial, RESULTS, server=RESULTS["tunelab"]["server"], telemetry={"energy_j": 10.0}
    )
    back = TrialStore(tmp_path / "t.db").get(trial.id)
    assert back.to_dict() == trial.to_dict()
    assert back.status is TrialStatus.DONE
    assert back.backend_requested == "ROCM_AITER_FA"
    assert back.objective_value == 123.5
    assert back.config.config_id == trial.config.config_id
    assert math.isinf(back.workload.request_rate)
    assert back.finished_at is not None and back.engine_pid is None
    assert back.environment == {"vllm_version": "0.32.0", "power_cap_w": 750.0}


def test_get_by_prefix_and_clear_errors(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    a, b = make_trial(), make_trial()
    a.id, b.id = "abc111111111", "abc222222222"
    store.add(a)
    store.add(b)
    assert store.get("abc1").id == a.id
    with pytest.raises(TrialNotFound, match="ambiguous"):
        store.get("abc")
    with pytest.raises(TrialNotFound, match="no trial with id 'zzz'"):
        store.get("zzz")
    with pytest.raises(TrialNotFound, match="no trial id"):
        store.get("  ")
    with pytest.raises(StoreError, match="already in the store"):
        store.add(a)
    # LIKE wildcards in a prefix are literal, not patterns.
    with pytest.raises(TrialNotFound):
        store.get("%")


def test_list_filters_and_studies(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    trials = [make_trial("one"), make_trial("one"), make_trial("two")]
    for t in trials:
        store.add(t)
    store.update_status(trials[1], TrialStatus.FAILED, failure_reason="boom")
    assert [t.id for t in store.list()] == [t.id for t in trials]
    assert [t.id for t in store.list("one")] == [trials[0].id, trials[1].id]
    assert [t.id for t in store.list(status="failed")] == [trials[1].id]
    assert [t.id for t in store.list("two", "queued")] == [trials[2].id]
    summary = {s.name: s for s in store.studies()}
    assert summary["one"].trials == 2 and summary["one"].counts == {"queued": 1, "failed": 1}
    assert summary["two"].counts == {"queued": 1}


def test_schema_is_versioned_and_a_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    TrialStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this tunelab"):
        TrialStore(path)


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(StoreError, match="not a usable tunelab store"):
        TrialStore(path)


def test_default_path_is_in_the_data_dir(tunelab_home: Path) -> None:
    store = TrialStore()
    assert store.path == tunelab_home / "data" / "tunelab.db"


_WRITER = r"""
import sys, time
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore
path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = TrialStore(path, timeout=60)
while time.time() < float(sys.argv[4]):
    time.sleep(0.001)
for i in range(n):
    t = Trial(EngineConfig(model="m", engine={"max-num-seqs": i + 1}), Workload(num_prompts=1), study=name)
    store.add(t)
    store.update_status(t, TrialStatus.STARTING)
    store.update_status(t, TrialStatus.MEASURING)
    store.save_result(t, {"output_throughput": float(i), "writer": name})
print("ok", flush=True)
"""


def test_two_processes_write_at_once_and_nothing_is_lost(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    TrialStore(path).close()
    go = time.time() + 1.5  # both start writing at the same moment
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), name, "60", str(go)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "ok"
    store = TrialStore(path)
    trials = store.list()
    assert len(trials) == 120
    assert {t.status for t in trials} == {TrialStatus.DONE}
    for name in ("w1", "w2"):
        mine = store.list(name)
        assert sorted(t.objective_value for t in mine) == [float(i) for i in range(60)]
        assert all(t.results and t.results["writer"] == name for t in mine)
    # The writes interleaved (the writers really ran at the same time).
    order = [t.study for t in trials]
    switches = sum(1 for x, y in itertools.pairwise(order) if x != y)
    assert switches > 2, f"writers ran one after the other ({switches} switches)"


def _dead_process() -> tuple[int, float]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    p = psutil.Process(proc.pid)
    created = p.create_time()
    proc.wait()
    return proc.pid, created


def test_recover_marks_orphans_interrupted_and_kills_their_engine(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    # An "engine" left behind: a real process tree in its own session (sleep under a shell).
    # Its environment carries the token the runner gives each engine (recovery's proof).
    engine = subprocess.Popen(
        ["sh", "-c", "sleep 300 & wait"],
        start_new_session=True,
        env={**os.environ, "TUNELAB_ENGINE_TOKEN": "t" * 32},
    )
    time.sleep(0.2)
    tree = {engine.pid} | {c.pid for c in psutil.Process(engine.pid).children(recursive=True)}
    assert len(tree) == 2
    dead_pid, dead_created = _dead_process()

    orphan = make_trial()
    store.add(orphan)
    store.update_status(
        orphan,
        TrialStatus.MEASURING,
        owner_pid=dead_pid,
        owner_created=dead_created,
        engine_pid=engine.pid,
        engine_created=psutil.Process(engine.pid).create_time(),
        engine_token="t" * 32,
    )
    starting = make_trial()
    store.add(starting)
    store.update_status(
        starting, TrialStatus.STARTING, owner_pid=dead_pid, owner_created=dead_created
    )
    mine = make_trial()  # owned by this live process: must be left alone
    pid, created = this_process()
    store.add(mine)
    store.update_status(mine, TrialStatus.MEASURING, owner_pid=pid, owner_created=created)
    done = make_trial()
    store.add(done)
    store.save_result(done, RESULTS)

    recovered = TrialStore(tmp_path / "t.db").recover()
    assert {t.id for t in recovered} == {orphan.id, starting.id}
    engine.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(
        psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in tree
    ):
        assert time.monotonic() < deadline, "the orphaned engine tree survived recover()"
        time.sleep(0.05)
    back = store.get(orphan.id)
    assert back.status is TrialStatus.INTERRUPTED
    assert "measuring" in (back.failure_reason or "") and "killed" in (back.failure_reason or "")
    assert back.engine_pid is None
    assert store.get(starting.id).status is TrialStatus.INTERRUPTED
    assert store.get(mine.id).status is TrialStatus.MEASURING
    assert store.get(done.id).status is TrialStatus.DONE
    assert store.recover() == []  # idempotent


def test_recover_never_kills_a_reused_pid(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        dead_pid, dead_created = _dead_process()
        trial = make_trial()
        store.add(trial)
        # The row names the bystander's pid but another create time: a reused pid.
        store.update_status(
            trial,
            TrialStatus.MEASURING,
            owner_pid=dead_pid,
            owner_created=dead_created,
            engine_pid=bystander.pid,
            engine_created=psutil.Process(bystander.pid).create_time() - 100.0,
        )
        assert [t.id for t in store.recover()] == [trial.id]
        assert bystander.poll() is None, "recover() killed a process that merely reused the pid"
    finally:
        bystander.kill()
        bystander.wait()


def test_export_json_and_csv(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    a = make_trial("exp")
    b = make_trial("exp", **{"max-num-batched-tokens": 4096})
    store.add(a)
    store.add(b)
    store.save_result(a, RESULTS, telemetry={"energy_j": 5.0, "tokens_per_joule": 1.5})
    store.update_status(b, TrialStatus.FAILED, failure_reason="engine, crashed\nbadly")
    data = json.loads(store.export_json("exp"))
    assert [d["id"] for d in data] == [a.id, b.id]
    assert data[0]["results"]["output_throughput"] == 123.5
    assert data[0]["workload"]["request_rate"] == "inf"
    assert data[1]["status"] == "failed"
    rows = list(csv.DictReader(io.StringIO(store.export_csv("exp"))))
    assert [r["id"] for r in rows] == [a.id, b.id]
    assert rows[0]["output_throughput"] == "123.5" and rows[0]["p99_ttft_ms"] == "42.0"
    assert rows[0]["tokens_per_joule"] == "1.5" and rows[0]["energy_j"] == "5.0"
    assert rows[0]["set:max-num-seqs"] == "8" and rows[0]["set:max-num-batched-tokens"] == ""
    assert rows[1]["set:max-num-batched-tokens"] == "4096"
    assert rows[1]["failure_reason"] == "engine, crashed\nbadly"  # quoted, not split
    assert rows[0]["set:VLLM_ROCM_USE_AITER"] == "1"
    assert store.export_json("nope") == "[]"


def test_objectives_are_validated_and_latencies_minimised() -> None:
    from tuner.trials.model import objective_minimised, validate_objective

    for ok in (
        "output_throughput",
        "p99_ttft_ms",
        "median_itl_ms",
        "p99.9_e2el_ms",
        "tokens_per_joule",
    ):
        assert validate_objective(ok) == ok
    with pytest.raises(ValueError, match="unknown objective 'speed'"):
        validate_objective("speed")
    assert objective_minimised("p99_ttft_ms") and objective_minimised("mean_e2el_ms")
    assert not objective_minimised("output_throughput") and not objective_minimised(
        "tokens_per_joule"
    )
    t = make_trial()
    t.objective = "p99_ttft_ms"
    t.results = {"p99_ttft_ms": 12.0, "output_throughput": float("nan")}
    assert t.minimise and t.objective_value == 12.0
    t.objective = "output_throughput"
    assert t.objective_value is None  # NaN is not a value to rank by
