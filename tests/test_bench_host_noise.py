"""The host-noise meter tells a quiet machine from one where others took the CPU.

Real processes, no mocks: a spinning foreign process must show as foreign
CPU and make the run contaminated; a spinning *child* of the measuring
process (a client subprocess, as `vllm bench serve` is in the engine test)
is the run's own and must not; the stored form reads back and drives the
A/B report's note.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import psutil
import pytest

from tuner.bench.host_noise import (
    HostNoise,
    HostNoiseMeter,
    host_note,
    local_server_pids,
)

SPIN = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


def _spinner(seconds: float, *, foreign: bool) -> subprocess.Popen[bytes]:
    """A process burning one core; ``foreign`` detaches it from this process's tree."""
    code = SPIN.format(s=seconds)
    if not foreign:
        return subprocess.Popen([sys.executable, "-c", code])
    # A grandchild whose parent exits at once: re-parented, no longer our descendant.
    launcher = (
        "import subprocess, sys; "
        f"print(subprocess.Popen([sys.executable, '-c', {code!r}], "
        "stdout=subprocess.DEVNULL).pid, flush=True)"
    )
    return subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE)


def test_a_foreign_spinning_process_contaminates_the_run() -> None:
    launcher = _spinner(2.0, foreign=True)
    out, _ = launcher.communicate(timeout=30)
    spinner = psutil.Process(int(out))
    time.sleep(0.2)  # the grandchild is running
    meter = HostNoiseMeter()
    meter.start()
    time.sleep(1.2)
    noise = meter.stop()
    with contextlib.suppress(psutil.NoSuchProcess):
        spinner.wait(timeout=30)  # gone before the next test measures
    assert noise is not None
    # One core of the machine's cores, give or take the scheduler.
    assert noise.foreign_share > min(0.8 / noise.cores, 0.4), noise
    assert noise.contaminated
    # The spinner is named among the heaviest foreign processes (another program busy on
    # a shared box may outrank it: the meter names what it saw, heaviest first).
    assert any(name.startswith("python") for name, _ in noise.top), noise.top
    assert [share for _, share in noise.top] == sorted((s for _, s in noise.top), reverse=True)
    line = noise.describe()
    assert line is not None and "other processes used" in line and "run it again" in line


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def test_the_runs_own_child_is_not_noise() -> None:
    # Asserted on the accounting, not on a quiet machine: whatever else the box
    # runs, the child's CPU must be in the run's own share.
    before = _children_cpu()
    child = _spinner(1.5, foreign=False)
    meter = HostNoiseMeter()
    meter.start()
    child.wait(timeout=30)  # reaped inside the window: its time moves to children_*
    noise = meter.stop()
    spent = _children_cpu() - before
    assert noise is not None and spent > 0.3
    assert noise.own_cpu_s >= 0.9 * spent, (noise, spent)


def test_the_stored_form_reads_back_and_drives_the_note() -> None:
    noisy = HostNoise(window_s=10.0, cores=2, foreign_share=0.45, steal_share=0.0,
                      top=(("stress-ng", 9.0),), server_seen=True)  # fmt: skip
    again = HostNoise.from_dict(noisy.to_dict())
    assert again == noisy
    result = {"tunelab": {"host_noise": noisy.to_dict()}}
    assert host_note(result) == noisy.describe()
    assert "stress-ng 9.0 s" in (host_note(result) or "")
    quiet = HostNoise(window_s=10.0, cores=2, foreign_share=0.01, steal_share=0.01)
    assert host_note({"tunelab": {"host_noise": quiet.to_dict()}}) is None
    assert host_note({"tunelab": {}}) is None and host_note({}) is None
    stolen = HostNoise(window_s=10.0, cores=2, foreign_share=0.0, steal_share=0.2)
    assert stolen.contaminated and "hypervisor stole 20%" in (stolen.describe() or "")


def test_local_server_pids_finds_the_listener_and_ignores_remote_hosts() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()  # "Serving HTTP on 127.0.0.1 port N ..."
        port = int(line.split(" port ")[1].split()[0])
        assert server.pid in local_server_pids(f"http://127.0.0.1:{port}")
        assert local_server_pids(f"http://10.255.255.1:{port}") == set()
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9", "http://localhost:1"])
def test_nothing_listening_is_an_empty_set(url: str) -> None:
    assert local_server_pids(url) == set()


def test_a_grandchild_reaped_by_its_parent_stays_the_runs_own() -> None:
    # An engine's helper processes come and go under it; their CPU is the run's.
    code = SPIN.format(s=1.2)
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {code!r}])"
    before = _children_cpu()
    meter = HostNoiseMeter()
    meter.start()
    subprocess.run([sys.executable, "-c", parent], check=True, timeout=60)
    noise = meter.stop()
    spent = _children_cpu() - before  # the grandchild's time reaches us through its parent
    assert noise is not None and spent > 0.3
    assert noise.own_cpu_s >= 0.9 * spent, (noise, spent)


def test_a_local_server_it_cannot_see_is_not_called_foreign_load() -> None:
    # A vLLM in a container or under another user: its busy API server is on these
    # cores, but its pids are not visible, so the foreign share cannot be judged.
    unseen = HostNoise(10.0, 2, foreign_share=0.5, steal_share=0.0, foreign_known=False)
    assert not unseen.contaminated and unseen.describe() is None
    assert HostNoise.from_dict(unseen.to_dict()) == unseen
    stolen = HostNoise(10.0, 2, foreign_share=0.5, steal_share=0.2, foreign_known=False)
    line = stolen.describe() or ""
    assert "hypervisor stole 20%" in line and "other processes" not in line
