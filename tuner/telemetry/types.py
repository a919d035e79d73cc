"""The data one telemetry read produces: a snapshot per GPU.

Every metric is optional because real devices leave many of them out (an
MI300X has no edge sensor, a GPU under MIG reports no utilisation, a
non-root user cannot see other users' processes). ``None`` means "the
device did not say" and renders as "N/A"; a backend must never fill a gap
with a zero that looks like a measurement. A GPU whose read failed as a
whole carries the reason in ``error`` and nothing else, so one broken GPU
shows up as such while the others keep reporting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process holding memory on a GPU.

    Attributes:
        pid: Process id as the driver reports it (host pid namespace).
        name: Process name, or None when the library could not tell.
        vram_bytes: VRAM the process holds, or None when not reported.
    """

    pid: int
    name: str | None = None
    vram_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """The state of one GPU at one read.

    Units are fixed here so the backends convert once and every consumer
    (table, TUI, window summary) can trust them: percent, bytes, watts,
    degrees Celsius, MHz.

    Attributes:
        index: Position in the backend's device list (0-based).
        name: Marketing name ("AMD Instinct MI300X", "NVIDIA H100 80GB HBM3").
        arch: Compute target ("gfx942", "gfx950", "sm_90").
        gfx_activity: Graphics/compute engine busy percent.
        umc_activity: Memory-controller busy percent.
        vram_used: VRAM in use, bytes.
        vram_total: VRAM size, bytes.
        power_w: Socket power now, watts.
        power_cap_w: Power cap in force, watts.
        temp_edge: Edge temperature, °C.
        temp_hotspot: Hotspot / junction temperature, °C.
        temp_mem: Memory (HBM) temperature, °C.
        gfx_clock_mhz: Current graphics clock.
        mem_clock_mhz: Current memory clock.
        compute_partition: "SPX", "CPX", ... on AMD; "MIG on"/"MIG off" on NVIDIA.
        memory_partition: "NPS1", "NPS4", ... on AMD.
        throttle: "none", or the active limiters ("power", "thermal", ...).
        processes: Processes on the GPU; None when the list is not readable
            (as opposed to an empty tuple: readable, and nobody is there).
        error: Why this GPU could not be read at all; None when it could.
    """

    index: int
    name: str | None = None
    arch: str | None = None
    gfx_activity: float | None = None
    umc_activity: float | None = None
    vram_used: int | None = None
    vram_total: int | None = None
    power_w: float | None = None
    power_cap_w: float | None = None
    temp_edge: float | None = None
    temp_hotspot: float | None = None
    temp_mem: float | None = None
    gfx_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    throttle: str | None = None
    processes: tuple[GpuProcess, ...] | None = field(default=None)
    error: str | None = None

    @classmethod
    def failed(cls, index: int, error: str, name: str | None = None) -> GpuSnapshot:
        """A snapshot for a GPU whose read failed: every metric N/A, with the reason."""
        return cls(index=index, name=name, error=error)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (processes as a list of dicts, None kept as null)."""
        data = asdict(self)
        if self.processes is not None:
            data["processes"] = [asdict(p) for p in self.processes]
        return data
