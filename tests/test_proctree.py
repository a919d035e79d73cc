"""Process-tree teardown and the reaper, on a vLLM-shaped tree of plain processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tuner.engine import proctree

REPO = Path(__file__).resolve().parents[1]


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_dead(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(pids)


def _start_tree() -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_tree"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    return proc, info["pids"]


def test_tree_finds_descendants_and_group_members() -> None:
    proc, pids = _start_tree()
    try:
        found = {r.pid for r in proctree.tree(proc.pid, proc.pid)}
        # root, child, grandchild (descendants); the setsid'd one is a descendant too.
        assert set(pids) <= found
    finally:
        proctree.kill_tree(proc.pid, graceful=0, term=0)
        proc.wait(5)


def test_kill_tree_ends_every_process_including_escaped_ones() -> None:
    proc, pids = _start_tree()
    known = proctree.tree(proc.pid, proc.pid)
    left = proctree.kill_tree(proc.pid, known=known, graceful=1.0, term=1.0)
    proc.wait(5)
    assert not left
    assert _wait_dead(pids, 5) == []


def test_reaper_kills_the_tree_when_its_parent_is_sigkilled(tmp_path: Path) -> None:
    # A "tunelab" process that starts the fake engine tree and its reaper, then is SIGKILLed.
    script = tmp_path / "parent.py"
    script.write_text(
        "import json, subprocess, sys, time\n"
        "from tuner.engine.server import _start_reaper\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'tests.support.fake_tree'], cwd={str(REPO)!r},"
        " stdout=subprocess.PIPE, text=True, start_new_session=True)\n"
        "info = json.loads(p.stdout.readline())\n"
        "r = _start_reaper(p.pid)\n"
        "time.sleep(1.5)\n"  # let the reaper take its first census
        "print(json.dumps({'pids': info['pids'], 'reaper': r.pid}), flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=env
    )
    assert parent.stdout is not None
    info = json.loads(parent.stdout.readline())
    assert len(_alive(info["pids"])) == 4
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(5)
    assert _wait_dead(info["pids"], 10) == [], "the reaper left processes behind"
    assert _wait_dead([info["reaper"]], 5) == [], "the reaper did not exit"


def test_procref_never_matches_a_reused_pid() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = proctree.ref(proc.pid)
    proc.wait()
    assert ref is not None
    assert not ref.alive()
    fake = proctree.ProcRef(os.getpid(), 0.0)  # our pid, wrong create time
    assert not fake.alive()


def test_a_process_being_torn_down_counts_as_dead_at_once() -> None:
    assert not proctree.exiting(os.getpid())
    assert not proctree.exiting(2**22 + 12345)  # no such pid
    # A process holding 1 GiB takes a while to exit after SIGKILL; PF_EXITING is set at once.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; x = b'1' * (1 << 30); print('ok', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ok"
    os.kill(proc.pid, signal.SIGKILL)
    t0 = time.monotonic()
    seen = False
    while not seen and proc.poll() is None:
        seen = proctree.exiting(proc.pid)
        time.sleep(0.001)
    noticed = time.monotonic() - t0
    proc.wait(10)
    exited = time.monotonic() - t0
    assert seen, f"exit finished after {exited:.3f} s before PF_EXITING was seen"
    assert noticed < 0.1 and noticed < exited
