"""Run a benchmark on an event loop of its own, in its own thread.

A benchmark client timestamps every streamed chunk when its event loop gets to
read it. On a loop it shares with a UI, a frame that takes 300 ms (re-applying
CSS after a focus change, laying out a new screen) delays every read by up
to that much: responses then arrive "in one piece", TTFT grows and ITL reads
0, and the trial measures the UI instead of the engine. On its own loop the
client is delayed at most by a GIL switch interval (5 ms) while the UI works.
The caller awaits the result as usual; cancelling the caller cancels the
benchmark on its loop and waits for it to wind down (connections closed), so
nothing outlives the trial.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_own_loop(make: Callable[[], Coroutine[Any, Any, T]], name: str = "bench") -> T:
    """Await ``make()`` run to completion on a fresh event loop in a new thread.

    Args:
        make: Builds the coroutine; it runs on the new loop, so whatever it
            creates while running belongs to that loop.
        name: The thread's name (shows in stack dumps and crash reports).

    Returns:
        The coroutine's result; its exception is raised here as it was raised there.

    Raises:
        asyncio.CancelledError: The caller was cancelled; the coroutine was
            cancelled on its own loop and has finished unwinding.
    """
    outer = asyncio.get_running_loop()
    done: asyncio.Future[T] = outer.create_future()
    loop = asyncio.new_event_loop()
    task = loop.create_task(make())  # queued; runs once the thread runs the loop

    def deliver() -> None:
        if done.done():
            return
        if task.cancelled():
            done.cancel()
        elif (exc := task.exception()) is not None:
            done.set_exception(exc)
        else:
            done.set_result(task.result())

    def main() -> None:
        try:
            loop.run_until_complete(asyncio.wait([task]))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
        if not outer.is_closed():
            outer.call_soon_threadsafe(deliver)

    threading.Thread(target=main, name=name, daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        if not done.done():
            with contextlib.suppress(RuntimeError):  # its loop already closed: it is over
                loop.call_soon_threadsafe(task.cancel)
            await asyncio.wait([done])
        raise


def on_loop(callback: Callable[[Any, float], None]) -> Callable[[Any], None]:
    """A callback the benchmark's thread may call: runs ``callback(value, sent_at)`` on this loop.

    ``sent_at`` is the monotonic time of the call in the benchmark's thread, so
    a caller that marks when something happened is not shifted by how long its
    own loop took to get to the call. Must be called on the caller's loop.
    """
    outer = asyncio.get_running_loop()

    def forward(value: Any) -> None:
        if not outer.is_closed():
            outer.call_soon_threadsafe(callback, value, time.monotonic())

    return forward
