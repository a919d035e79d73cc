"""Run a benchmark client in a process of its own, so trials side by side do not share a GIL.

A client on its own event loop (tuner.bench.own_loop) is no longer delayed by
a UI's frames, but it still shares the interpreter lock with the UI and with
every other trial's client: ``benchmarks/client_headroom.py`` measured four
clients in one process at 0.85x the requests/s they reach in four processes,
so on a node running several trials at once the slower trials would measure
tunelab, not the engine. Here the client runs as ``python -m
tuner.bench.own_process``: the request (URL, model, workload, who else counts
as the run's own CPU) goes in as a pickle file, progress comes back as JSON
lines on stdout stamped with the child's monotonic clock (one clock for the
whole machine on Linux, so the telemetry window edges are exact), and the
result (or the exception) comes back as a pickle file. Cancelling the caller
sends SIGTERM: the child cancels its run (connections closed) and exits; a
child still there after a grace period is killed. A child whose parent dies
sees its stdin close and exits at once, so no client outlives tunelab.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tuner.bench.errors import BenchError
from tuner.bench.progress import BenchProgress
from tuner.bench.runner import BenchResult, run_benchmark
from tuner.bench.workload import Workload
from tuner.bounded import loads

# How long a cancelled child may take to close its connections before it is killed.
GRACE_S = 5.0
_PROGRESS = "progress"


async def run_in_process(
    url: str,
    model: str | None,
    workload: Workload,
    *,
    on_progress: Callable[[BenchProgress, float], None] | None = None,
    python: str = sys.executable,
) -> BenchResult:
    """:func:`tuner.bench.runner.run_benchmark` in a child process; same result, same errors.

    Args:
        url, model, workload: As ``run_benchmark``.
        on_progress: Called on this loop with each progress and the monotonic
            time the child sent it.
        python: The interpreter of the child (tunelab's own).

    Raises:
        BenchError, WorkloadError: As ``run_benchmark`` raised them in the child.
        asyncio.CancelledError: The caller was cancelled; the child has exited.
    """
    with tempfile.TemporaryDirectory(prefix="tunelab-bench-") as tmp:
        request, answer = Path(tmp) / "request.pkl", Path(tmp) / "answer.pkl"
        request.write_bytes(
            pickle.dumps({"url": url, "model": model, "workload": workload, "own": os.getpid()})
        )
        proc = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "tuner.bench.own_process",
            str(request),
            str(answer),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            errors = asyncio.ensure_future(_read_all(proc.stderr))
            await _relay(proc.stdout, on_progress)
            code = await proc.wait()
            stderr = await errors
        except BaseException:
            await _stop(proc)
            raise
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
        return _outcome(answer, code, stderr)


async def _relay(
    stdout: asyncio.StreamReader | None, on_progress: Callable[[BenchProgress, float], None] | None
) -> None:
    if stdout is None:
        return
    while line := await stdout.readline():
        with contextlib.suppress(ValueError, TypeError, KeyError):
            message = loads(line, what="progress line")  # ValueError when too deep
            if on_progress is not None and _PROGRESS in message:
                on_progress(BenchProgress(**message[_PROGRESS]), float(message["sent"]))


async def _read_all(stream: asyncio.StreamReader | None) -> bytes:
    return await stream.read() if stream is not None else b""


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM (the child cancels its run and closes its connections), then SIGKILL."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), GRACE_S)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(proc.wait(), GRACE_S)


def _outcome(answer: Path, code: int, stderr: bytes) -> BenchResult:
    """The child's result, or its exception raised here."""
    try:
        found = pickle.loads(answer.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        tail = stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise BenchError(
            f"the benchmark client process ended with status {code} and no result"
            + (f": {' | '.join(tail)}" if tail else ""),
            fix="run `tunelab bench` against the same server to see the client's error",
        ) from None
    if isinstance(found, BaseException):
        raise found
    if not isinstance(found, BenchResult):
        raise BenchError(f"the benchmark client process returned {type(found).__name__}")
    return found


# -- the child ------------------------------------------------------------------


def _watch_parent() -> None:
    """Exit at once when stdin closes: the parent died (or let go), nobody wants the result."""

    def wait() -> None:
        with contextlib.suppress(Exception):
            sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=wait, name="parent-watch", daemon=True).start()


def _send_progress(progress: BenchProgress) -> None:
    line = json.dumps({_PROGRESS: asdict(progress), "sent": time.monotonic()})
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return BenchError(f"{type(exc).__name__}: {exc}")


async def _child_main(request: dict[str, Any]) -> BenchResult:
    task = asyncio.ensure_future(
        run_benchmark(
            request["url"],
            request["model"],
            request["workload"],
            on_progress=_send_progress,
            also_own={int(request["own"])},
        )
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    return await task


def main(argv: list[str]) -> int:
    """``python -m tuner.bench.own_process REQUEST ANSWER`` (what :func:`run_in_process` starts)."""
    request_path, answer_path = Path(argv[0]), Path(argv[1])
    # Ctrl-C and a terminal hang-up reach the whole process group: the parent decides
    # what they mean (it cancels, and then stops this child with SIGTERM).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _watch_parent()
    request = pickle.loads(request_path.read_bytes())
    try:
        result: Any = asyncio.run(_child_main(request))
    except asyncio.CancelledError:
        return 130
    except BaseException as exc:  # handed to the parent, which raises it there
        result = _picklable(exc)
    tmp = answer_path.with_suffix(".part")
    tmp.write_bytes(pickle.dumps(result))
    os.replace(tmp, answer_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
