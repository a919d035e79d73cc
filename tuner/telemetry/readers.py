"""Reading every GPU once a tick: one thread for all of them, its own thread for a GPU that hung.

A driver call can block for seconds (a GPU in reset, a wedged SMU), and the
sampler must still show the other GPUs on time. A thread per GPU gives that,
but wakes eight threads a tick for reads of ~50 µs each: on an idle node the
thread hand-offs cost more CPU than the reads. So the reads share one thread,
in order, and the tick waits for it up to a deadline. When the deadline passes
with that thread inside one GPU's call, that GPU keeps the stuck thread as its
own from then on (it may hang again), and the GPUs not read yet go to a fresh
shared thread with one more deadline, so a hang costs the others one late tick,
never a false "timed out". A GPU whose read missed both deadlines is shown as
timed out for that tick, as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.telemetry.base import Backend
from tuner.telemetry.types import GpuSnapshot

# Deadlines one tick may spend on a hang: the first, and one more for the GPUs behind it.
ROUNDS = 2


class _Reader:
    """A worker thread that reads the GPUs it is given, one after another."""

    def __init__(self, backend: Backend, name: str) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self.done = threading.Event()
        self.done.set()  # idle: nothing asked
        self._todo: list[int] = []
        self._results: dict[int, GpuSnapshot] = {}
        self._current: int | None = None
        self._generation = 0  # bumped by each request: an answer to an older one is stale
        self.started = 0.0
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def assign(self, indices: Sequence[int]) -> None:
        """Read these GPUs, in order; an answer still due to an earlier request is dropped."""
        with self._lock:
            self._todo = list(indices)
            self._results = {}
            self._generation += 1
            self.started = time.monotonic()
            self.done.clear()
        self._wake.set()

    def results(self) -> dict[int, GpuSnapshot]:
        """The answers so far to the last request."""
        with self._lock:
            return dict(self._results)

    def keep_stuck(self) -> tuple[int | None, list[int]]:
        """Keep only the GPU being read now; hand back the ones not read yet.

        Returns:
            The GPU this reader is inside a call for (None: it is between calls,
            e.g. a thread starved on a loaded box), and the GPUs asked but not
            read, which are no longer this reader's.
        """
        with self._lock:
            stuck = self._current
            rest = [i for i in self._todo if i != stuck and i not in self._results]
            self._todo = [i for i in self._todo if i == stuck or i in self._results]
            return stuck, rest

    def _next(self) -> tuple[int | None, int]:
        with self._lock:
            index = next((i for i in self._todo if i not in self._results), None)
            self._current = index
            if index is None:
                self.done.set()
            return index, self._generation

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self.stopping:
                return
            while True:
                index, generation = self._next()
                if index is None:
                    break
                try:
                    result = self._backend.snapshot(index)
                except Exception as exc:  # a backend bug shows as this GPU's error only
                    result = GpuSnapshot.failed(index, f"read failed: {type(exc).__name__}: {exc}")
                with self._lock:
                    self._current = None
                    if generation == self._generation and index in self._todo:
                        self._results[index] = result

    def stop(self) -> None:
        self.stopping = True
        self._wake.set()


@dataclass(frozen=True, slots=True)
class Read:
    """One GPU's answer in a tick: its snapshot, or None and how long its call has been due."""

    index: int
    snapshot: GpuSnapshot | None
    waited_s: float = 0.0


class ReaderPool:
    """The threads that read a backend's GPUs: one shared, plus one per GPU that ever hung.

    Args:
        backend: The opened backend.
        count: How many GPUs it has.
    """

    def __init__(self, backend: Backend, count: int) -> None:
        self._backend = backend
        self._count = count
        self._shared = _Reader(backend, "tunelab-gpu-reader")
        self._own: dict[int, _Reader] = {}

    @property
    def isolated(self) -> frozenset[int]:
        """GPUs read by a thread of their own (each hung once)."""
        return frozenset(self._own)

    def read(self, timeout: float) -> list[Read]:
        """Read every GPU once: ``timeout`` for each of at most ROUNDS rounds of the shared thread.

        A GPU whose own thread is still inside an earlier call is not asked
        again; it reads as timed out until that call returns (that late answer
        is stale: the GPU is read again on the next tick).
        """
        start = time.monotonic()
        if not self._shared.done.is_set():  # still inside a call from the last tick: that hung
            self._isolate_stuck()
        asked = []
        for index, reader in self._own.items():
            if reader.done.is_set():
                reader.assign([index])
                asked.append(reader)
        answers = self._read_shared(timeout)
        for reader in asked:
            reader.done.wait(max(0.0, start + timeout - time.monotonic()))
            answers.update(reader.results())
        now = time.monotonic()
        return [
            Read(i, answers[i]) if i in answers else Read(i, None, now - self._asked(i, start))
            for i in range(self._count)
        ]

    def _read_shared(self, timeout: float) -> dict[int, GpuSnapshot]:
        answers: dict[int, GpuSnapshot] = {}
        pending = [i for i in range(self._count) if i not in self._own]
        for _ in range(ROUNDS):
            if not pending:
                break
            self._shared.assign(pending)
            self._shared.done.wait(timeout)
            answers.update(self._shared.results())
            if self._shared.done.is_set():
                break
            pending = self._isolate_stuck()
        return answers

    def _isolate_stuck(self) -> list[int]:
        """The shared thread missed its deadline: the GPU it is inside keeps it; the rest move on.

        Returns:
            The GPUs it had not read yet.
        """
        stuck, rest = self._shared.keep_stuck()
        if stuck is not None:  # a thread between calls (starved) is no GPU's fault: reuse it
            self._shared.thread.name = f"tunelab-gpu{stuck}-reader"
            self._own[stuck] = self._shared
            self._shared = _Reader(self._backend, "tunelab-gpu-reader")
        return rest

    def _asked(self, index: int, tick_start: float) -> float:
        """When GPU ``index``'s unanswered call was asked for (its own thread's request, or now)."""
        reader = self._own.get(index)
        return min(reader.started, tick_start) if reader is not None else tick_start

    def stop(self) -> None:
        """Stop every idle thread; one inside a hung call is left as a daemon."""
        for reader in (self._shared, *self._own.values()):
            reader.stop()
