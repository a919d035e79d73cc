"""The reader pool: one thread reads every GPU; a GPU that hangs gets a thread of its own.

The GPUs come from a backend whose calls can be made to block on a gate (a
driver call that hangs), with every call's thread recorded, so the tests see
which thread read which GPU and that no answer is invented or stale.
"""

from __future__ import annotations

import threading
import time

from tuner.telemetry.readers import ROUNDS, ReaderPool
from tuner.telemetry.types import GpuSnapshot


class GatedBackend:
    """GPUs whose reads return a call counter; a GPU with a gate blocks until it opens."""

    name = "gated"
    description = "gated test backend"
    reasons = ()

    def __init__(self, count: int) -> None:
        self._count = count
        self.gates: dict[int, threading.Event] = {}
        self.calls: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._n = 0

    def count(self) -> int:
        return self._count

    def snapshot(self, index: int) -> GpuSnapshot:
        with self._lock:
            self._n += 1
            n = self._n
            self.calls.append((index, threading.current_thread().name))
        gate = self.gates.get(index)
        if gate is not None:
            gate.wait()
        return GpuSnapshot(index=index, power_w=float(n))


def test_one_thread_reads_every_gpu_in_a_quiet_tick() -> None:
    backend = GatedBackend(8)
    pool = ReaderPool(backend, 8)
    try:
        for _ in range(3):
            reads = pool.read(timeout=2.0)
            assert [r.index for r in reads] == list(range(8))
            assert all(r.snapshot is not None and r.snapshot.index == r.index for r in reads)
        assert {name for _, name in backend.calls} == {"tunelab-gpu-reader"}
        assert len(backend.calls) == 24
        assert pool.isolated == frozenset()
    finally:
        pool.stop()


def test_a_hang_costs_the_gpus_behind_it_a_late_tick_not_a_false_timeout() -> None:
    backend = GatedBackend(4)
    gate = threading.Event()
    backend.gates[1] = gate  # GPU 1's call blocks: GPUs 2 and 3 are behind it in the order
    pool = ReaderPool(backend, 4)
    try:
        # Deadlines long enough for a loaded 2-core box to schedule a fresh thread in time.
        started = time.monotonic()
        reads = pool.read(timeout=0.5)
        took = time.monotonic() - started
        assert reads[1].snapshot is None and reads[1].waited_s >= 0.45
        assert [r.snapshot is not None for r in reads] == [True, False, True, True]
        assert took < ROUNDS * 0.5 + 0.5
        assert pool.isolated == frozenset({1})
        # From now on GPU 1's stuck call is not repeated, and the tick does not wait for it:
        # far less than its 3 s deadline.
        calls_of_1 = sum(1 for i, _ in backend.calls if i == 1)
        started = time.monotonic()
        reads = pool.read(timeout=3.0)
        assert time.monotonic() - started < 2.0
        assert [r.snapshot is not None for r in reads] == [True, False, True, True]
        assert reads[1].waited_s >= 0.5  # counted from the call still due, not this tick
        assert sum(1 for i, _ in backend.calls if i == 1) == calls_of_1
        # The driver answers: that late answer is stale; the next tick reads GPU 1 afresh.
        gate.set()
        time.sleep(0.05)
        before = len(backend.calls)
        reads = pool.read(timeout=0.5)
        assert all(r.snapshot is not None for r in reads)
        late = [n for n, (i, _) in enumerate(backend.calls) if i == 1][-1]
        assert late >= before  # GPU 1's answer comes from a call made in this tick
        assert reads[1].snapshot is not None
        assert reads[1].snapshot.power_w == float(late + 1)
        names = {name for i, name in backend.calls[before:] if i == 1}
        assert names == {"tunelab-gpu1-reader"}
    finally:
        for g in backend.gates.values():
            g.set()
        pool.stop()


def test_every_gpu_hanging_ends_the_tick_within_its_rounds() -> None:
    backend = GatedBackend(3)
    gate = threading.Event()
    for i in range(3):
        backend.gates[i] = gate
    pool = ReaderPool(backend, 3)
    try:
        started = time.monotonic()
        reads = pool.read(timeout=0.3)
        assert time.monotonic() - started < ROUNDS * 0.3 + 0.5
        assert all(r.snapshot is None for r in reads)
        # Each round isolates the GPU it was stuck in; the third is taken on the next tick.
        assert pool.isolated == frozenset({0, 1})
        reads = pool.read(timeout=0.3)
        assert all(r.snapshot is None for r in reads)
        assert pool.isolated == frozenset({0, 1, 2})
    finally:
        gate.set()
        pool.stop()


def test_an_answer_to_an_earlier_request_is_never_taken_for_the_new_one() -> None:
    backend = GatedBackend(2)
    gate = threading.Event()
    backend.gates[0] = gate
    pool = ReaderPool(backend, 2)
    try:
        pool.read(timeout=0.3)  # GPU 0 hangs: isolated, its call still due
        assert pool.isolated == frozenset({0})
        gate.set()  # the call returns now, between ticks: stale for the next tick
        time.sleep(0.05)
        del backend.gates[0]
        reads = pool.read(timeout=0.5)
        assert reads[0].snapshot is not None
        last_call = max(n for n, (i, _) in enumerate(backend.calls) if i == 0)
        assert reads[0].snapshot.power_w == float(last_call + 1)
        assert sum(1 for i, _ in backend.calls if i == 0) == 2
    finally:
        gate.set()
        pool.stop()
