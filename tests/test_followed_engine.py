"""The host line counts the engine of an attached job (issue 32: it said "not running").

A TUI that follows a study-service job (its A/B outlived the terminal) shows that
job's engine as the study's own: tuner.engine.running counts a followed engine root
by the pid and start time its trial recorded, so a pid the kernel reused later is
never taken for it, and the GPU panel's "foreign process" check leaves it out.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tui import detached
from tui.widgets.gpu_panel import host_line
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.engine import running
from tuner.engine.running import EngineLoad
from tuner.lab.study import Study
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore


@pytest.fixture
def engine() -> Iterator[psutil.Process]:
    """A stand-in process tree for a job's engine (a parent with one child), reaped after."""
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    root = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 10
        while not root.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield root
    finally:
        running.unfollow()
        for p in [*root.children(recursive=True), root]:
            with contextlib.suppress(psutil.Error):
                p.kill()
        proc.wait(timeout=10)


def test_a_followed_engine_counts_only_while_it_is_the_recorded_process(
    engine: psutil.Process,
) -> None:
    # Engines this test process already runs (a shared engine of another test) stay counted
    # throughout: the check is what following adds and what unfollowing takes away.
    tree = {engine.pid, *(c.pid for c in engine.children())}
    before = running.engine_pids()
    assert engine.pid not in running.roots()
    running.follow(engine.pid, engine.create_time() + 5.0)  # another process's start time
    assert engine.pid not in running.roots()
    running.follow(engine.pid, engine.create_time())
    assert engine.pid in running.roots()
    assert tree <= running.engine_pids()
    load = EngineLoad().sample()
    assert load.procs >= len(tree) >= 2
    line = str(host_line(10.0, 2, 1 << 30, 4 << 30, load))
    assert "not running" not in line and f"engine {load.procs} procs" in line
    running.unfollow(engine.pid)
    assert engine.pid not in running.roots() and not tree & running.engine_pids()
    if not before:  # nothing else running: the line says so again
        assert "not running" in str(host_line(10.0, 2, 1 << 30, 4 << 30, EngineLoad().sample()))


def test_following_a_job_reads_the_engine_its_trial_recorded(
    engine: psutil.Process, tmp_path: Path
) -> None:
    trial = Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": 2}),
        workload=Workload(input_len=8, output_len=8, num_prompts=4),
        study="tui",
        status=TrialStatus.MEASURING,
        engine_pid=engine.pid,
        engine_created=engine.create_time(),
    )
    with TrialStore(tmp_path / "t.db") as store:
        store.add(trial)
        detached._follow_engine(lambda: Study(store, "tui"), trial.id)
        assert engine.pid in running.roots()
        detached._follow_engine(lambda: Study(store, "tui"), "0" * 32)  # unknown: no error
