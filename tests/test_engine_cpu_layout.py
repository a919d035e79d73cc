"""The CPU engine's process layout (tuner.engine.cpu_layout) on real processes.

Three sleeping children stand for vLLM's tree, named as vLLM names its processes
(``prctl(PR_SET_NAME)``, what psutil reads): the API server (the root), an EngineCore and a
Worker that binds itself to one core, as vLLM's OMP binding does. The layout must put the
EngineCore beside the worker and the API server on the other cores, and change nothing where
the box cannot be split.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tuner.engine.cpu_layout import split

CHILD = """
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
if sys.argv[2]:
    os.sched_setaffinity(0, {int(sys.argv[2])})
print("ready", flush=True)
time.sleep(60)
"""
CORES = sorted(os.sched_getaffinity(0))


def _start(name: str, core: str = "") -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, name, core], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def tree() -> Iterator[dict[str, subprocess.Popen[str]]]:
    procs = {"api": _start("python3"), "core": _start("VLLM::EngineCore")}
    yield procs
    for p in procs.values():
        p.kill()
        p.wait()


@pytest.mark.skipif(len(CORES) < 2, reason="one core cannot be split")
def test_the_engine_core_goes_beside_the_worker_and_the_api_server_apart(
    tree: dict[str, subprocess.Popen[str]],
) -> None:
    tree["worker"] = _start("VLLM::Worker", str(CORES[0]))
    pids = {p.pid for p in tree.values()}
    made = split(tree["api"].pid, pids)
    assert made.reason == ""
    assert made.engine_cores == {CORES[0]} and made.server_cores == set(CORES[1:])
    assert os.sched_getaffinity(tree["core"].pid) == {CORES[0]}
    assert os.sched_getaffinity(tree["worker"].pid) == {CORES[0]}
    assert os.sched_getaffinity(tree["api"].pid) == set(CORES[1:])


def test_an_unbound_worker_or_a_gone_server_changes_nothing(
    tree: dict[str, subprocess.Popen[str]],
) -> None:
    tree["worker"] = _start("VLLM::Worker")  # vLLM's binding off: the worker on every core
    pids = {p.pid for p in tree.values()}
    made = split(tree["api"].pid, pids)
    assert "no worker bound" in made.reason or "all the cores" in made.reason
    assert os.sched_getaffinity(tree["core"].pid) == set(CORES)
    assert "the API server is gone" in split(999_999_999, pids).reason
