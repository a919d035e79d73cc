"""Background GPU sampling with a ring buffer, and energy over a time window.

One sampler thread ticks at a fixed rate (2 Hz by default). The GPUs are read
off that thread (:mod:`tuner.telemetry.readers`: one reader for all, its own
for a GPU that hung), and the tick waits for the reads only up to a deadline:
a GPU whose driver call hangs is reported as "read timed out" (every metric
N/A) while the other GPUs keep their normal cadence. Results
go into a per-GPU ``deque(maxlen=history)`` and into a ``latest`` list that
readers take without any lock, so a UI redraw never waits on a driver.

:meth:`Sampler.window` summarises any span: mean and peak utilisation, peak
VRAM, mean power and energy in joules. Energy is the trapezoidal integral of
power over time, clipped exactly at the window edges by linear
interpolation; spans where a power reading is missing are not bridged but
reported as uncovered, so tokens-per-joule is never computed from invented
watts.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner.telemetry import clean
from tuner.telemetry.base import Backend
from tuner.telemetry.readers import ROUNDS, ReaderPool
from tuner.telemetry.types import GpuSnapshot


@dataclass(frozen=True, slots=True)
class Sample:
    """One GPU snapshot and the sampler-clock time it was requested at."""

    t: float
    snapshot: GpuSnapshot


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """What one GPU did during a window.

    Attributes:
        index: GPU index.
        samples: Samples whose time falls inside the window.
        mean_gfx_activity: Mean of the readable GFX activity samples, percent.
        peak_gfx_activity: Highest GFX activity sample, percent.
        mean_umc_activity: Mean memory-controller activity, percent.
        peak_vram_bytes: Highest VRAM use seen.
        mean_power_w: Energy / covered seconds (time-weighted), or the single
            reading when only one sample has power.
        peak_power_w: Highest power sample.
        energy_j: Integral of power over the covered part of the window.
        covered_s: Seconds of the window between two consecutive power readings.
        series: The window's samples as ``(seconds since t0, power W, GFX %,
            VRAM bytes)``, thinned to at most ``SERIES_POINTS`` evenly spread
            ones (a missing reading stays None): the report's timeline.
        clean_samples: Samples with nothing wrong (tuner.telemetry.clean.dirt).
        dirt: Reason -> how many samples it spoiled (``foreign process``,
            ``throttled``, ``at power cap``); a sample may count under several.
    """

    index: int
    samples: int
    mean_gfx_activity: float | None
    peak_gfx_activity: float | None
    mean_umc_activity: float | None
    peak_vram_bytes: int | None
    mean_power_w: float | None
    peak_power_w: float | None
    energy_j: float | None
    covered_s: float
    series: tuple[tuple[float, float | None, float | None, int | None], ...] = ()
    clean_samples: int = 0
    dirt: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """All GPUs over ``[t0, t1]`` (sampler-clock seconds)."""

    t0: float
    t1: float
    gpus: tuple[GpuWindow, ...]

    @property
    def duration_s(self) -> float:
        return max(0.0, self.t1 - self.t0)

    @property
    def energy_j(self) -> float | None:
        """Total energy of all GPUs; None unless every GPU has an energy figure."""
        if not self.gpus or any(g.energy_j is None for g in self.gpus):
            return None
        return sum(g.energy_j for g in self.gpus if g.energy_j is not None)

    @property
    def coverage(self) -> float:
        """Smallest fraction of the window any GPU's energy covers (1.0 = all of it)."""
        if not self.gpus or self.duration_s <= 0:
            return 0.0
        return min(g.covered_s for g in self.gpus) / self.duration_s

    @property
    def mean_power_w(self) -> float | None:
        """Sum of the GPUs' mean power: the node's GPU power draw."""
        parts = [g.mean_power_w for g in self.gpus]
        if not parts or any(p is None for p in parts):
            return None
        return sum(p for p in parts if p is not None)

    @property
    def mean_gfx_activity(self) -> float | None:
        parts = [g.mean_gfx_activity for g in self.gpus if g.mean_gfx_activity is not None]
        return sum(parts) / len(parts) if parts else None

    @property
    def peak_gfx_activity(self) -> float | None:
        parts = [g.peak_gfx_activity for g in self.gpus if g.peak_gfx_activity is not None]
        return max(parts) if parts else None

    @property
    def samples(self) -> int:
        """Samples of all GPUs inside the window."""
        return sum(g.samples for g in self.gpus)

    @property
    def clean_samples(self) -> int:
        """Of those, samples with nothing wrong (no foreign process, throttle or power cap)."""
        return sum(g.clean_samples for g in self.gpus)

    @property
    def dirt(self) -> dict[str, int]:
        """Reason -> samples it spoiled, over all GPUs."""
        out: dict[str, int] = {}
        for g in self.gpus:
            for why, n in g.dirt.items():
                out[why] = out.get(why, 0) + n
        return out

    @property
    def peak_vram_bytes(self) -> int | None:
        parts = [g.peak_vram_bytes for g in self.gpus if g.peak_vram_bytes is not None]
        return max(parts) if parts else None

    def tokens_per_joule(self, tokens: float) -> float | None:
        """Tokens per joule for ``tokens`` produced in the window; None without full energy."""
        energy = self.energy_j
        if energy is None or energy <= 0 or self.coverage < 0.999:
            return None
        return tokens / energy

    def to_dict(self) -> dict[str, Any]:
        return {
            "t0": self.t0,
            "t1": self.t1,
            "duration_s": self.duration_s,
            "energy_j": self.energy_j,
            "coverage": self.coverage,
            "mean_power_w": self.mean_power_w,
            "mean_gfx_activity": self.mean_gfx_activity,
            "peak_gfx_activity": self.peak_gfx_activity,
            "peak_vram_bytes": self.peak_vram_bytes,
            "samples": self.samples,
            "samples_clean": self.clean_samples,
            "dirt": self.dirt,
            # The JSON form (what the store reads back): series points as lists.
            "gpus": [{**asdict(g), "series": [list(p) for p in g.series]} for g in self.gpus],
        }


class Sampler:
    """Samples every GPU of a backend in the background.

    Args:
        backend: An opened backend (``select_backend()`` returns one). The
            sampler never closes it; its owner does.
        rate_hz: Samples per second.
        history: Samples kept per GPU (ring buffer).
        read_timeout: Seconds a tick waits for the reads before the GPU being
            read is taken as hung; the GPUs behind it get as long again (two
            rounds, :mod:`tuner.telemetry.readers`). Default 40 % of the period,
            so a tick that meets a hang still ends within the period.
        clock: Time source for sample stamps and windows (tests inject one).
        on_sample: Called from the sampler thread after each tick with the new
            snapshots (a Textual app would forward with ``call_from_thread``).

    Raises:
        ValueError: For a non-positive rate, history or timeout.
    """

    def __init__(
        self,
        backend: Backend,
        rate_hz: float = 2.0,
        history: int = 120,
        *,
        read_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_sample: Callable[[list[GpuSnapshot]], None] | None = None,
    ) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be > 0 (got {rate_hz}); 2.0 is a good default")
        if history < 1:
            raise ValueError(f"history must be >= 1 sample (got {history})")
        if read_timeout is not None and read_timeout <= 0:
            raise ValueError(f"read_timeout must be > 0 seconds (got {read_timeout})")
        self.backend = backend
        self.rate_hz = float(rate_hz)
        self.history_len = int(history)
        self.read_timeout = read_timeout if read_timeout is not None else 0.4 / self.rate_hz
        self._clock = clock
        self._on_sample = on_sample
        n = backend.count()
        self._history: list[deque[Sample]] = [deque(maxlen=self.history_len) for _ in range(n)]
        self._latest: list[GpuSnapshot] = []
        self._latest_t: float | None = None
        self._names: list[str | None] = [None] * n
        self._lock = threading.Lock()
        self._readers: ReaderPool | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0

    # -- lifecycle ---------------------------------------------------------

    @property
    def description(self) -> str:
        return self.backend.description

    @property
    def tick_limit_s(self) -> float:
        """The longest one tick's reads take (a hang met: every round's deadline spent)."""
        return ROUNDS * self.read_timeout

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start the sampler thread (does nothing without GPUs or when running)."""
        if self.running or not self._history:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="tunelab-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop sampling; the history stays readable. Hung readers are left as daemons."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._readers is not None:
            self._readers.stop()
            self._readers = None

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading -----------------------------------------------------------

    def latest(self) -> list[GpuSnapshot]:
        """The most recent snapshot of every GPU; never blocks ([] before the first tick)."""
        return self._latest

    @property
    def latest_time(self) -> float | None:
        return self._latest_t

    def history(self, index: int, last: int | None = None) -> list[Sample]:
        """Samples of GPU ``index``, oldest first (at most ``history`` of them; ``last``: the
        newest that many, for a sparkline that needs a minute, not the hour kept for windows)."""
        with self._lock:
            ring = self._history[index]
            if last is None or last >= len(ring):
                return list(ring)
            return list(itertools.islice(ring, len(ring) - max(0, last), None))

    def window(self, t0: float, t1: float, own: set[int] | None = None) -> WindowSummary:
        """Summarise every GPU over ``[t0, t1]`` in sampler-clock seconds.

        ``own``: the measurement's own pids (its engine's tree); processes not in
        it make a sample dirty. None: processes are not judged.

        Raises:
            ValueError: When ``t1 < t0``.
        """
        if t1 < t0:
            raise ValueError(f"window end {t1} is before its start {t0}")
        with self._lock:
            copies = [list(h) for h in self._history]
        return WindowSummary(
            t0=t0,
            t1=t1,
            gpus=tuple(_summarise(i, s, t0, t1, own) for i, s in enumerate(copies)),
        )

    def now(self) -> float:
        """The sampler clock now (use it to mark window edges)."""
        return self._clock()

    # -- sampling ----------------------------------------------------------

    def sample_now(self) -> list[GpuSnapshot]:
        """Take one sample of every GPU (the thread calls this each tick)."""
        n = len(self._history)
        if n == 0:
            return []
        if self._readers is None:
            self._readers = ReaderPool(self.backend, n)
        t = self._clock()
        snaps: list[GpuSnapshot] = []
        for read in self._readers.read(self.read_timeout):
            snap = read.snapshot
            if snap is None:
                snap = GpuSnapshot.failed(
                    read.index,
                    f"read timed out (no answer for {read.waited_s:.1f} s)",
                    name=self._names[read.index],
                )
            elif snap.name is not None:
                self._names[read.index] = snap.name
            snaps.append(snap)
        with self._lock:
            for i, snap in enumerate(snaps):
                self._history[i].append(Sample(t, snap))
        self._latest = snaps
        self._latest_t = t
        self.ticks += 1
        if self._on_sample is not None:
            with contextlib.suppress(Exception):  # a UI callback error must not stop sampling
                self._on_sample(snaps)
        return snaps

    def _run(self) -> None:
        period = 1.0 / self.rate_hz
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self.sample_now()
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay < 0:  # fell behind (hung reads, slow box): skip, don't burst
                next_tick = time.monotonic()
                delay = 0.0
            if self._stop.wait(delay):
                break


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# Points kept per GPU and window for the timeline: enough for a plot, small in the store.
SERIES_POINTS = 120


def _series(
    samples: list[Sample], t0: float, t1: float
) -> tuple[tuple[float, float | None, float | None, int | None], ...]:
    """The window's samples, evenly thinned to at most SERIES_POINTS (first and last kept)."""
    inside = [s for s in samples if t0 <= s.t <= t1]
    if len(inside) > SERIES_POINTS:
        step = (len(inside) - 1) / (SERIES_POINTS - 1)
        inside = [inside[round(i * step)] for i in range(SERIES_POINTS)]
    return tuple(
        (
            round(s.t - t0, 3),
            s.snapshot.power_w,
            s.snapshot.gfx_activity,
            s.snapshot.vram_used,
        )
        for s in inside
    )


def _summarise(
    index: int, samples: list[Sample], t0: float, t1: float, own: set[int] | None = None
) -> GpuWindow:
    inside = [s.snapshot for s in samples if t0 <= s.t <= t1]
    clean_count = 0
    spoiled: dict[str, int] = {}
    for snap in inside:
        why = clean.dirt(snap, own)
        clean_count += not why
        for reason in why:
            spoiled[reason] = spoiled.get(reason, 0) + 1
    gfx = [s.gfx_activity for s in inside if s.gfx_activity is not None]
    umc = [s.umc_activity for s in inside if s.umc_activity is not None]
    vram = [s.vram_used for s in inside if s.vram_used is not None]
    power_inside = [s.power_w for s in inside if s.power_w is not None]

    energy = 0.0
    covered = 0.0
    for a, b in itertools.pairwise(samples):
        pa, pb = a.snapshot.power_w, b.snapshot.power_w
        if pa is None or pb is None or b.t <= a.t:
            continue
        lo, hi = max(a.t, t0), min(b.t, t1)
        if hi <= lo:
            continue
        slope = (pb - pa) / (b.t - a.t)
        p_lo = pa + slope * (lo - a.t)
        p_hi = pa + slope * (hi - a.t)
        energy += (hi - lo) * (p_lo + p_hi) / 2.0
        covered += hi - lo

    if covered > 0:
        mean_power: float | None = energy / covered
        energy_j: float | None = energy
    else:
        mean_power = _mean(power_inside)
        energy_j = None
    return GpuWindow(
        index=index,
        samples=len(inside),
        mean_gfx_activity=_mean(gfx),
        peak_gfx_activity=max(gfx) if gfx else None,
        mean_umc_activity=_mean(umc),
        peak_vram_bytes=max(vram) if vram else None,
        mean_power_w=mean_power,
        peak_power_w=max(power_inside) if power_inside else None,
        energy_j=energy_j,
        covered_s=covered,
        series=_series(samples, t0, t1),
        clean_samples=clean_count,
        dirt=spoiled,
    )
