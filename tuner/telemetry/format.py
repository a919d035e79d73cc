"""Text for telemetry values: one place decides how "N/A" and units look.

The CLI table and the TUI panels both render snapshots; sharing these
helpers keeps "N/A" (never "0") for missing values and the same units
everywhere.
"""

from __future__ import annotations

from tuner.telemetry.types import GpuSnapshot

NA = "N/A"
GIB = 1024**3


def pct(value: float | None) -> str:
    """ "37%" or "N/A"."""
    return NA if value is None else f"{value:.0f}%"


def gib(value: int | None) -> str:
    """Bytes as GiB with one decimal, or "N/A"."""
    return NA if value is None else f"{value / GIB:.1f}"


def vram(snap: GpuSnapshot, unit: bool = True) -> str:
    """ "12.3 / 192.0 GiB" with N/A for the missing side."""
    return f"{gib(snap.vram_used)}/{gib(snap.vram_total)}" + (" GiB" if unit else "")


def power(snap: GpuSnapshot, unit: bool = True) -> str:
    """ "412/750 W" with N/A for the missing side."""
    now = NA if snap.power_w is None else f"{snap.power_w:.0f}"
    cap = NA if snap.power_cap_w is None else f"{snap.power_cap_w:.0f}"
    return f"{now}/{cap}" + (" W" if unit else "")


def temp(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}"


def temps(snap: GpuSnapshot, unit: bool = True) -> str:
    """Edge/hotspot/memory in °C."""
    text = f"{temp(snap.temp_edge)}/{temp(snap.temp_hotspot)}/{temp(snap.temp_mem)}"
    return text + (" °C" if unit else "")


def mhz(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}"


def clocks(snap: GpuSnapshot, unit: bool = True) -> str:
    """GFX/memory clocks in MHz."""
    return f"{mhz(snap.gfx_clock_mhz)}/{mhz(snap.mem_clock_mhz)}" + (" MHz" if unit else "")


def partition(snap: GpuSnapshot) -> str:
    """ "SPX/NPS1"; a single side when the other is not reported at all."""
    parts = [p for p in (snap.compute_partition, snap.memory_partition) if p is not None]
    return "/".join(parts) if parts else NA


def text(value: str | None) -> str:
    return NA if value is None else value


def process_count(snap: GpuSnapshot) -> str:
    return NA if snap.processes is None else str(len(snap.processes))
