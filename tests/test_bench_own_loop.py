"""The benchmark's own event loop (tuner.bench.own_loop): results, errors, cancellation, isolation.

The point of the module is that a caller's loop that stalls (a UI frame) does
not delay the benchmark's reads; the isolation test blocks the caller's loop
for 1 s and requires the benchmark's 10-ms ticks to go on meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest

from tuner.bench.own_loop import on_loop, run_in_own_loop


async def test_result_comes_from_another_thread_and_loop() -> None:
    caller = (threading.get_ident(), asyncio.get_running_loop())

    async def where() -> tuple[int, asyncio.AbstractEventLoop]:
        return threading.get_ident(), asyncio.get_running_loop()

    ident, loop = await run_in_own_loop(where)
    assert ident != caller[0] and loop is not caller[1]
    assert loop.is_closed()  # nothing is left running after the result


async def test_the_exception_is_raised_in_the_caller() -> None:
    async def fails() -> None:
        raise ValueError("no model served")

    with pytest.raises(ValueError, match="no model served"):
        await run_in_own_loop(fails)


async def test_cancelling_the_caller_unwinds_the_benchmark_first() -> None:
    steps: list[str] = []
    started = threading.Event()

    async def long() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # closing connections takes a moment
            steps.append("benchmark unwound")

    task = asyncio.ensure_future(run_in_own_loop(long))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    steps.append("caller cancelled")
    assert steps == ["benchmark unwound", "caller cancelled"]


async def test_a_blocked_caller_loop_does_not_delay_the_benchmark() -> None:
    ticks: list[float] = []
    started = threading.Event()

    async def ticking() -> None:
        started.set()
        for _ in range(100):  # about 1 s of 10-ms ticks
            await asyncio.sleep(0.01)
            ticks.append(time.monotonic())

    task = asyncio.ensure_future(run_in_own_loop(ticking))
    await asyncio.to_thread(started.wait, 5)
    time.sleep(1.0)  # the caller's loop is frozen (as by a long UI frame)
    await task
    worst = max(b - a for a, b in itertools.pairwise(ticks))
    # On a shared loop one gap would be the whole second.
    assert worst < 0.5, f"the benchmark stalled {worst:.2f} s with its caller"


async def test_on_loop_runs_the_callback_on_the_callers_loop_with_the_send_time() -> None:
    caller = threading.get_ident()
    got: list[tuple[int, int, float, float]] = []
    forward = on_loop(
        lambda value, sent_at: got.append((value, threading.get_ident(), sent_at, time.monotonic()))
    )

    async def report() -> None:
        for i in range(3):
            forward(i)
            await asyncio.sleep(0)

    await run_in_own_loop(report)
    await asyncio.sleep(0.05)  # let the forwarded calls run
    assert [g[0] for g in got] == [0, 1, 2]
    assert all(g[1] == caller and g[2] <= g[3] for g in got)
