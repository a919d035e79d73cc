"""Studies on GPU slots and sequential A/B, through the real CLI on the study engine double.

The GPUs are fake (``TUNELAB_FORCE_GPU_COUNT``): the scheduler pins each
engine with CUDA_VISIBLE_DEVICES exactly as on a GPU node, the runner records
the slot on the trial, and the double ignores it.
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
from typer.testing import CliRunner

from tests.support import study_cli
from tuner.cli import study_session
from tuner.cli.app import app, register_all
from tuner.trials.slots import FORCE_ENV
from tuner.trials.store import TrialStore

register_all(app)
REPO = Path(__file__).resolve().parents[1]
FAST = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
FAST += ["--num-prompts", "16", "--concurrency", "8", "--warmup", "0"]
AB = ["ab", "--a-set", "max-num-seqs=1", "--b-set", "max-num-seqs=8"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr(study_session, "make_runner", study_cli._make_runner)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    return CliRunner()


def _json(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_sequential_ab_stops_early_and_the_stored_report_agrees(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(FORCE_ENV, "0")
    store = str(tmp_path / "t.db")
    args = [*AB, "--max-repeats", "6", *FAST, "--study", "seq", "--store", store, "--json"]
    data = _json(cli.invoke(app, args))
    assert data["verdict"] == "B better", data["summary"]
    assert data["stopped"] == "different"
    per_arm = len(data["trials"]["A"])
    assert 2 <= per_arm < 6 and len(data["trials"]["B"]) == per_arm
    assert data["looks"][-1]["n_a"] == per_arm
    head = next(m for m in data["metrics"] if m["metric"] == "output_throughput")
    assert head["confidence"] == pytest.approx(data["looks"][-1]["confidence"])
    stored = _json(
        cli.invoke(app, ["ab", "--report", "--study", "seq", "--store", store, "--json"])
    )
    assert stored["looks"] == data["looks"] and stored["summary"] == data["summary"]


def test_parallel_ab_runs_arms_together_and_swaps_their_gpus(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    path = tmp_path / "t.db"
    args = [*AB, "--repeats", "4", *FAST, "--study", "par", "--store", str(path), "--json"]
    data = _json(cli.invoke(app, args))
    assert data["verdict"] == "B better", data["summary"]
    with TrialStore(path) as store:
        trials = store.list(study="par")
    assert len(trials) == 8
    # Each GPU served each arm equally often: the arm <-> GPU swap.
    counts = {(t.gpu_slot, t.arm) for t in trials}
    assert counts == {("0", "A"), ("0", "B"), ("1", "A"), ("1", "B")}
    for gpu in ("0", "1"):
        arms = [t.arm for t in trials if t.gpu_slot == gpu]
        assert arms.count("A") == arms.count("B") == 2, (gpu, arms)
    # Within a wave A and B ran at the same time on different GPUs.
    by_wave: dict[int, list] = {}
    for t in trials:
        by_wave.setdefault(t.tags["wave"], []).append(t)
    assert sorted(by_wave) == [0, 1, 2, 3]
    for wave in by_wave.values():
        a, b = sorted(wave, key=lambda t: t.arm)
        assert a.gpu_slot != b.gpu_slot
        assert a.started_at < b.finished_at and b.started_at < a.finished_at
    assert any("per-GPU effect" in note for note in data["notes"]), data["notes"]


def test_a_gpu_list_the_node_does_not_have_is_refused(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    result = cli.invoke(app, [*AB, *FAST, "--gpus", "0,7"])
    assert result.exit_code == 2
    assert "names GPU 7 but this node shows 0,1" in result.output
    bad = cli.invoke(app, [*AB, *FAST, "--max-repeats", "4", "--equivalence", "two"])
    assert bad.exit_code == 2 and "percentage such as 2%" in bad.output


def _starts(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigkill_of_a_parallel_tune_then_resume_loses_nothing(tmp_path: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "starts.jsonl"
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    load = ["--input-len", "8", "--output-len", "32", "--num-prompts", "8", "--concurrency", "1"]
    args = ["tune", "--param", "max-num-seqs=1,2,4,8", "--study", "pk", "--storage", url]
    args += ["--model", "engine-double", *load, "--warmup", "0"]
    env = {
        **os.environ,
        "TUNELAB_HOME": str(home),
        "DOUBLE_START_LOG": str(log),
        FORCE_ENV: "2",
        "COLUMNS": "200",
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("HIP_VISIBLE_DEVICES", None)
    cmd = [sys.executable, "-m", "tests.support.study_cli"]
    # ~8 requests x 32 tokens x 10 ms = 2.6 s of measuring per trial: both slots busy at the kill.
    proc = subprocess.Popen(
        [*cmd, *args, "--trials", "4"],
        cwd=REPO,
        env={**env, "DOUBLE_TOKEN_MS": "10"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while len(_starts(log)) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    first_two = _starts(log)[:2]
    assert len(first_two) == 2, "two trials never ran at once"
    # Two engines at once, on different GPUs.
    assert {s["cuda_visible_devices"] for s in first_two} == {"0", "1"}
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    gone_by = time.monotonic() + 15
    while any(_alive(s["pid"]) for s in first_two) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert not [s["pid"] for s in first_two if _alive(s["pid"])], "an engine outlived tunelab"

    done = subprocess.run(
        [*cmd, *args, "--trials", "3", "--json"],
        cwd=REPO,
        env={**env, "DOUBLE_TOKEN_MS": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert sorted(report["recovered"]) == [0, 1]  # both killed points told FAIL, none lost
    assert report["measured"] == 3
    with TrialStore(home / "data" / "tunelab.db") as store:
        trials = store.list("pk")
    statuses = sorted(str(t.status) for t in trials)
    assert statuses == ["done", "done", "done", "interrupted", "interrupted"], statuses
    # No GPU double-booked: trials that overlapped in time ran on different GPUs.
    spans = [(t.started_at, t.finished_at or time.time(), t.gpu_slot) for t in trials]
    for i, (s1, e1, g1) in enumerate(spans):
        for s2, e2, g2 in spans[i + 1 :]:
            if s1 and s2 and s1 < e2 and s2 < e1:
                assert g1 != g2, spans
