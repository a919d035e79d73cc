"""Live GPU telemetry: amdsmi first, NVML second, honest when there is none.

Typical use (what ``tunelab gpus`` and the TUI do)::

    from tuner.telemetry import Sampler, select_backend

    backend = select_backend("auto")      # never prints; NoneBackend + reasons if no GPU
    sampler = Sampler(backend, rate_hz=2.0, history=120)
    sampler.start()
    t0 = sampler.now(); ...; summary = sampler.window(t0, sampler.now())
    sampler.stop(); backend.close()

Importing this package loads neither amdsmi nor pynvml; selection does.
"""

from tuner.telemetry.base import Backend, BackendUnavailable, NoneBackend
from tuner.telemetry.sampler import GpuWindow, Sample, Sampler, WindowSummary
from tuner.telemetry.select import CHOICES, select_backend
from tuner.telemetry.types import GpuProcess, GpuSnapshot

__all__ = [
    "CHOICES",
    "Backend",
    "BackendUnavailable",
    "GpuProcess",
    "GpuSnapshot",
    "GpuWindow",
    "NoneBackend",
    "Sample",
    "Sampler",
    "WindowSummary",
    "select_backend",
]
