"""Sampler: exact energy on scripted power, ring-buffer length, rate, hung GPUs."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time

import pytest

from tests.fakes import fake_amdsmi
from tuner.telemetry import clean
from tuner.telemetry.amd import AmdSmiBackend
from tuner.telemetry.base import NoneBackend
from tuner.telemetry.sampler import SERIES_POINTS, Sampler
from tuner.telemetry.types import GpuProcess, GpuSnapshot


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def piecewise(points: list[tuple[float, float | None]]):
    """Linear interpolation through (t, watts) points; None where the point is None."""

    def power(t: float) -> float | None:
        for (ta, pa), (tb, pb) in itertools.pairwise(points):
            if ta <= t <= tb:
                if t == ta:
                    return pa
                if t == tb:
                    return pb
                if pa is None or pb is None:
                    return None
                return pa + (pb - pa) * (t - ta) / (tb - ta)
        raise AssertionError(f"t={t} outside the script")

    return power


class ScriptedBackend:
    """A backend whose GPUs draw a scripted power at the (fake) clock's time."""

    name = "scripted"
    description = "scripted power trace"
    reasons = ()

    def __init__(self, clock: FakeClock, traces: list, vram: int = 1000) -> None:
        self.clock = clock
        self.traces = traces
        self.vram = vram

    def open(self) -> None:
        return None

    def count(self) -> int:
        return len(self.traces)

    def snapshot(self, index: int) -> GpuSnapshot:
        t = self.clock()
        return GpuSnapshot(
            index=index,
            power_w=self.traces[index](t),
            gfx_activity=50.0 + 10 * index,
            vram_used=self.vram + int(t) * 10,
        )

    def close(self) -> None:
        return None


def run_script(sampler: Sampler, clock: FakeClock, times: list[float]) -> None:
    for t in times:
        clock.t = t
        sampler.sample_now()


TRACE = [(0.0, 100.0), (1.0, 300.0), (2.0, 300.0), (3.0, 50.0), (4.0, 50.0)]


def test_energy_is_exact_on_a_piecewise_linear_trace() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock, [piecewise(TRACE), piecewise([(0.0, 200.0), (4.0, 200.0)])])
    sampler = Sampler(backend, history=100, clock=clock)
    try:
        run_script(sampler, clock, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0])
        whole = sampler.window(0.0, 4.0)
        # 0-1: (100+300)/2 = 200; 1-2: 300; 2-3: (300+50)/2 = 175; 3-4: 50  -> 725 J
        assert whole.gpus[0].energy_j == pytest.approx(725.0, rel=1e-12)
        assert whole.gpus[1].energy_j == pytest.approx(800.0, rel=1e-12)
        assert whole.energy_j == pytest.approx(1525.0, rel=1e-12)
        assert whole.coverage == pytest.approx(1.0)
        assert whole.gpus[0].mean_power_w == pytest.approx(725.0 / 4.0)
        assert whole.mean_power_w == pytest.approx(725.0 / 4.0 + 200.0)
        assert whole.gpus[0].peak_power_w == 300.0
        assert whole.tokens_per_joule(3050.0) == pytest.approx(2.0)

        # Edges between samples are clipped by linear interpolation, still exact.
        part = sampler.window(0.25, 3.75)
        expected = (
            0.25 * (150.0 + 200.0) / 2  # 0.25 .. 0.5
            + 0.5 * (200.0 + 300.0) / 2  # 0.5 .. 1
            + 300.0  # 1 .. 2
            + 175.0  # 2 .. 3
            + 0.75 * 50.0  # 3 .. 3.75
        )
        assert part.gpus[0].energy_j == pytest.approx(expected, rel=1e-12)
        assert part.gpus[0].covered_s == pytest.approx(3.5)
    finally:
        sampler.stop()


def test_sparse_sampling_of_a_linear_ramp_is_still_exact() -> None:
    clock = FakeClock()
    ramp = piecewise([(0.0, 0.0), (10.0, 1000.0)])
    sampler = Sampler(ScriptedBackend(clock, [ramp]), history=10, clock=clock)
    try:
        run_script(sampler, clock, [0.0, 3.0, 10.0])
        # Integral of 100 t over 2..7 = 50 (49 - 4) = 2250
        assert sampler.window(2.0, 7.0).gpus[0].energy_j == pytest.approx(2250.0, rel=1e-12)
    finally:
        sampler.stop()


def test_missing_power_is_not_bridged() -> None:
    clock = FakeClock()
    trace = piecewise([(0.0, 100.0), (1.0, 100.0), (2.0, None), (3.0, 100.0), (4.0, 100.0)])
    sampler = Sampler(ScriptedBackend(clock, [trace]), history=10, clock=clock)
    try:
        run_script(sampler, clock, [0.0, 1.0, 2.0, 3.0, 4.0])
        summary = sampler.window(0.0, 4.0)
        gpu = summary.gpus[0]
        assert gpu.energy_j == pytest.approx(200.0)  # only 0-1 and 3-4 are covered
        assert gpu.covered_s == pytest.approx(2.0)
        assert summary.coverage == pytest.approx(0.5)
        assert summary.tokens_per_joule(1000) is None  # never from a half-measured window
    finally:
        sampler.stop()


def test_window_stats_and_validation() -> None:
    clock = FakeClock()
    sampler = Sampler(
        ScriptedBackend(clock, [piecewise(TRACE), piecewise(TRACE)]), history=100, clock=clock
    )
    try:
        run_script(sampler, clock, [0.0, 1.0, 2.0, 3.0, 4.0])
        s = sampler.window(1.0, 3.0)
        assert [g.samples for g in s.gpus] == [3, 3]
        assert s.gpus[1].mean_gfx_activity == 60.0
        assert s.peak_gfx_activity == 60.0
        assert s.mean_gfx_activity == 55.0
        assert s.peak_vram_bytes == 1030
        assert s.to_dict()["gpus"][0]["energy_j"] == pytest.approx(475.0)
        with pytest.raises(ValueError, match="before its start"):
            sampler.window(3.0, 1.0)
    finally:
        sampler.stop()


def test_window_keeps_each_gpus_samples_as_its_timeline() -> None:
    """The report draws these points: they must be the samples, in time since the window's start."""
    clock = FakeClock()
    trace = piecewise([(0.0, 100.0), (2.0, None), (4.0, 100.0)])
    sampler = Sampler(ScriptedBackend(clock, [piecewise(TRACE), trace]), history=100, clock=clock)
    try:
        run_script(sampler, clock, [0.0, 1.0, 2.0, 3.0, 4.0])
        s = sampler.window(1.0, 3.0)
        assert s.gpus[0].series == (
            (0.0, 300.0, 50.0, 1010),
            (1.0, 300.0, 50.0, 1020),
            (2.0, 50.0, 50.0, 1030),
        )
        assert s.gpus[1].series[1] == (1.0, None, 60.0, 1020)  # a missing reading stays a gap
        assert s.to_dict()["gpus"][0]["series"][2] == [2.0, 50.0, 50.0, 1030]  # JSON-shaped
    finally:
        sampler.stop()


def test_a_long_window_is_thinned_evenly_keeping_both_ends() -> None:
    clock = FakeClock()
    ramp = piecewise([(0.0, 0.0), (300.0, 300.0)])
    sampler = Sampler(ScriptedBackend(clock, [ramp]), history=1000, clock=clock)
    try:
        run_script(sampler, clock, [float(t) for t in range(301)])
        series = sampler.window(0.0, 300.0).gpus[0].series
        assert len(series) == SERIES_POINTS
        assert series[0][:2] == (0.0, 0.0) and series[-1][:2] == (300.0, 300.0)
        gaps = [b[0] - a[0] for a, b in itertools.pairwise(series)]
        assert max(gaps) - min(gaps) <= 1.0  # evenly spread, not bunched at one end
        assert all(p[1] == p[0] for p in series)  # each point is a real sample (power = t here)
    finally:
        sampler.stop()


class DirtyBackend(ScriptedBackend):
    """GPU 1 gets a stranger's process from t=2 on and a throttled clock at t=3."""

    def snapshot(self, index: int) -> GpuSnapshot:
        snap = super().snapshot(index)
        t = self.clock()
        procs = (GpuProcess(1, "vllm"),) + (
            (GpuProcess(666, "stress"),) if t >= 2 and index else ()
        )
        throttle = "power" if index and t == 3 else "none"
        return dataclasses.replace(snap, processes=procs, throttle=throttle)


def test_window_counts_the_samples_a_foreign_process_or_throttling_spoiled() -> None:
    clock = FakeClock()
    flat = piecewise([(0.0, 100.0), (4.0, 100.0)])
    sampler = Sampler(DirtyBackend(clock, [flat, flat]), history=100, clock=clock)
    try:
        run_script(sampler, clock, [0.0, 1.0, 2.0, 3.0, 4.0])
        s = sampler.window(0.0, 4.0, own={1})  # pid 1 is the measurement's engine
        assert (s.gpus[0].clean_samples, s.gpus[0].dirt) == (5, {})
        assert s.gpus[1].clean_samples == 2  # t=0, 1
        assert s.gpus[1].dirt == {clean.FOREIGN: 3, clean.THROTTLED: 1}
        assert (s.samples, s.clean_samples) == (10, 7)
        data = s.to_dict()
        assert (data["samples"], data["samples_clean"]) == (10, 7)
        assert data["dirt"] == {clean.FOREIGN: 3, clean.THROTTLED: 1}
        # Without knowing the engine's pids, processes are not judged; throttling still is.
        assert sampler.window(0.0, 4.0).gpus[1].dirt == {clean.THROTTLED: 1}
    finally:
        sampler.stop()


def test_a_gpu_pinned_at_its_power_cap_is_not_clean() -> None:
    at_cap = GpuSnapshot(index=0, power_w=745.0, power_cap_w=750.0, throttle="none", processes=())
    below = dataclasses.replace(at_cap, power_w=600.0)
    assert clean.dirt(at_cap, set()) == (clean.AT_POWER_CAP,)
    assert clean.dirt(below, set()) == ()
    assert clean.dirt(dataclasses.replace(below, processes=None), set()) == ()  # unknown list


def test_history_is_a_ring_buffer() -> None:
    clock = FakeClock()
    sampler = Sampler(ScriptedBackend(clock, [lambda t: 100.0] * 3), history=5, clock=clock)
    try:
        run_script(sampler, clock, [float(t) for t in range(12)])
        for i in range(3):
            hist = sampler.history(i)
            assert [s.t for s in hist] == [7.0, 8.0, 9.0, 10.0, 11.0]
            assert all(s.snapshot.index == i for s in hist)
        assert sampler.latest_time == 11.0
        assert [s.index for s in sampler.latest()] == [0, 1, 2]
    finally:
        sampler.stop()


def test_rate_is_respected() -> None:
    seen: list[float] = []
    backend = AmdSmiBackend(fake_amdsmi.make_module("mi300x"))
    backend.open()
    sampler = Sampler(backend, rate_hz=20.0, history=1000, on_sample=lambda s: seen.append(1.0))
    try:
        sampler.start()
        time.sleep(1.0)
        sampler.stop()
        stamps = [s.t for s in sampler.history(0)]
        # Never bursts above the rate; on a loaded 2-core box it may fall a little behind.
        assert 10 <= len(stamps) <= 22
        gaps = sorted(b - a for a, b in itertools.pairwise(stamps))
        assert gaps[len(gaps) // 2] == pytest.approx(0.05, abs=0.015)
        assert len(seen) == sampler.ticks == len(stamps)
    finally:
        sampler.stop()
        backend.close()


def test_hung_gpu_does_not_stall_the_others() -> None:
    mod = fake_amdsmi.make_module("mi300x")
    gate = threading.Event()
    backend = AmdSmiBackend(mod)
    backend.open()
    sampler = Sampler(backend, rate_hz=10.0, history=100, read_timeout=0.05)
    try:
        backend.snapshot(3)  # learn GPU 3's name before it hangs
        sampler.sample_now()
        mod.hang[3] = gate
        sampler.start()
        time.sleep(0.8)
        started = time.perf_counter()
        latest = sampler.latest()
        assert time.perf_counter() - started < 0.01  # latest() never waits on a driver
        assert latest[3].error is not None and "timed out" in latest[3].error
        assert latest[3].name == "AMD Instinct MI300X"  # last known name kept
        assert latest[3].power_w is None
        assert [s.error for i, s in enumerate(latest) if i != 3] == [None] * 7
        assert latest[0].power_w == 612.0
        assert len(sampler.history(0)) >= 5  # the others kept their cadence
        del mod.hang[3]
        gate.set()
        time.sleep(0.5)
        assert sampler.latest()[3].error is None  # recovers once the driver answers
    finally:
        gate.set()
        sampler.stop()
        backend.close()


def test_backend_exception_in_snapshot_is_that_gpus_error() -> None:
    class Flaky(ScriptedBackend):
        def snapshot(self, index: int) -> GpuSnapshot:
            if index == 1:
                raise RuntimeError("driver went away")
            return super().snapshot(index)

    clock = FakeClock()
    sampler = Sampler(Flaky(clock, [lambda t: 1.0, lambda t: 1.0]), clock=clock)
    try:
        snaps = sampler.sample_now()
        assert snaps[0].error is None
        assert snaps[1].error == "read failed: RuntimeError: driver went away"
    finally:
        sampler.stop()


def test_no_gpu_sampler_is_inert() -> None:
    sampler = Sampler(NoneBackend(["x: y"]))
    sampler.start()
    assert not sampler.running
    assert sampler.latest() == [] and sampler.sample_now() == []
    assert sampler.description == "No GPU visible: x: y"
    summary = sampler.window(0.0, 1.0)
    assert summary.energy_j is None and summary.tokens_per_joule(10) is None
    sampler.stop()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate_hz": 0}, "rate_hz must be > 0"),
        ({"history": 0}, "history must be >= 1"),
        ({"read_timeout": -1.0}, "read_timeout must be > 0"),
    ],
)
def test_bad_settings_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Sampler(NoneBackend(), **kwargs)
