"""The benchmark client in a process of its own (tuner.bench.own_process).

Against the programmable stub server (tests/support/openai_stub.py, a real
HTTP server in its own process): the child's result is the benchmark's, with
the stub's programmed timings; progress arrives stamped with the child's
clock; the child's errors are raised in the caller with their message;
cancelling the caller ends the child; and a killed caller takes its client
with it. The isolation test holds the caller's GIL (a pure-Python loop) for a
second while the client streams: the reads are not delayed by it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.openai_stub import StubProcess
from tuner.bench.errors import BenchError
from tuner.bench.own_process import run_in_process
from tuner.bench.progress import BenchProgress
from tuner.bench.workload import Workload

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProcess]:
    with StubProcess({}) as s:
        yield s


def _children() -> list[psutil.Process]:
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "tuner.bench.own_process" in " ".join(p.cmdline())
    ]


async def test_the_result_and_progress_come_from_the_child(stub: StubProcess) -> None:
    stub.reset({"ttft_ms": 50, "itl_ms": 20})
    seen: list[tuple[BenchProgress, float, float]] = []
    wl = Workload(input_len=16, output_len=10, num_prompts=12, concurrency=4)
    result = await run_in_process(
        stub.url, None, wl, on_progress=lambda p, sent: seen.append((p, sent, time.monotonic()))
    )
    assert (result.completed, result.failed) == (12, 0)
    assert result.metrics["median_itl_ms"] == pytest.approx(20.0, abs=6.0)
    assert result.metrics["median_ttft_ms"] >= 50.0
    assert result.host_noise is not None  # metered in the child, this process counted as own
    assert seen and seen[-1][0].done == 12
    # Stamped when the child sent it (one monotonic clock per machine): never after receipt.
    assert all(sent <= got for _, sent, got in seen)
    assert not _children()


async def test_an_error_in_the_child_is_raised_here_with_its_message() -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=2)
    with pytest.raises(BenchError) as caught:
        await run_in_process("http://127.0.0.1:9", "m", wl)  # nothing listens on port 9
    assert "127.0.0.1:9" in str(caught.value)
    assert not _children()


async def test_cancelling_the_caller_ends_the_child(stub: StubProcess) -> None:
    stub.reset({"ttft_ms": 10, "itl_ms": 200})
    wl = Workload(input_len=8, output_len=200, num_prompts=8, concurrency=8)
    started = asyncio.Event()
    task = asyncio.ensure_future(
        run_in_process(stub.url, None, wl, on_progress=lambda p, s: started.set())
    )
    await asyncio.wait_for(started.wait(), 30)
    assert len(_children()) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _children()


def _hold_the_gil(seconds: float) -> float:
    """One C call (``sum`` over a range) that keeps the GIL for about ``seconds``; its length."""
    t = time.monotonic()
    sum(range(200_000))
    rate = 200_000 / max(time.monotonic() - t, 1e-6)
    t = time.monotonic()
    sum(range(int(rate * seconds)))
    return time.monotonic() - t


async def test_a_held_gil_in_the_caller_does_not_delay_the_reads(stub: StubProcess) -> None:
    stub.reset({"ttft_ms": 10, "itl_ms": 10})
    wl = Workload(input_len=8, output_len=150, num_prompts=4, concurrency=4)
    task = asyncio.ensure_future(run_in_process(stub.url, None, wl))
    await asyncio.sleep(0.8)  # the child is up and streaming
    held = _hold_the_gil(0.6)  # a thread in this process could not read meanwhile
    result = await task
    assert held > 0.3, held
    # A client sharing this process would show a gap as long as the hold in every stream.
    gaps = [
        b - a
        for r in result.records
        for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)
    ]
    assert len(gaps) == 4 * 149 and max(gaps) < held / 2, (max(gaps), held)
    assert result.metrics["median_itl_ms"] == pytest.approx(10.0, abs=5.0)


def test_a_killed_caller_takes_its_client_along(stub: StubProcess, tmp_path: Path) -> None:
    stub.reset({"ttft_ms": 10, "itl_ms": 500})
    marker = tmp_path / "child.pid"
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(REPO)!r})
        from tuner.bench.own_process import run_in_process
        from tuner.bench.workload import Workload
        import psutil

        def progress(p, sent):
            kids = [c.pid for c in psutil.Process().children()]
            open({str(marker)!r}, "w").write(" ".join(map(str, kids)))

        wl = Workload(input_len=8, output_len=400, num_prompts=4, concurrency=4)
        asyncio.run(run_in_process({stub.url!r}, None, wl, on_progress=progress))
        """
    )
    caller = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text().strip()):
            assert time.monotonic() < deadline, "the client never reported progress"
            time.sleep(0.1)
        (child,) = [int(p) for p in marker.read_text().split()]
        assert psutil.pid_exists(child)
        os.kill(caller.pid, signal.SIGKILL)
        caller.wait(5)
        gone = time.monotonic() + 5
        while psutil.pid_exists(child) and psutil.Process(child).status() != "zombie":
            assert time.monotonic() < gone, "the client outlived its caller"
            time.sleep(0.05)
    finally:
        if caller.poll() is None:
            caller.kill()
