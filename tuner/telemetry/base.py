"""What every telemetry backend offers, and the backend for "no GPU here".

A backend wraps one vendor library (amdsmi, NVML) behind five calls:
``open()`` once, ``count()``, ``snapshot(i)`` as often as the sampler likes,
``close()`` once. ``open()`` raises :class:`BackendUnavailable` with a short,
human reason when the library or the devices are missing; the selector
collects those reasons into a :class:`NoneBackend`, so "no GPU" is a state
the UI can explain ("amdsmi: libamd_smi.so not found; NVML: ...") rather
than an error.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tuner.errors import RunFailedError
from tuner.telemetry.types import GpuSnapshot


class BackendUnavailable(RunFailedError):
    """The backend cannot run here; ``str(exc)`` is the reason shown to the user."""


@runtime_checkable
class Backend(Protocol):
    """A source of GPU snapshots.

    ``snapshot(i)`` must not raise for a device-level failure: it returns a
    snapshot with the failing metrics set to None (or ``error`` set when
    nothing could be read), so one bad GPU never hides the others.
    """

    name: str

    @property
    def description(self) -> str:
        """One line for the UI: library, version, device count or why there is none."""
        ...

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why GPUs are missing (empty for a working backend)."""
        ...

    def open(self) -> None:
        """Initialise the library and enumerate devices; raise BackendUnavailable if impossible."""
        ...

    def count(self) -> int:
        """Number of GPUs visible after ``open()``."""
        ...

    def snapshot(self, index: int) -> GpuSnapshot:
        """Read GPU ``index`` now."""
        ...

    def close(self) -> None:
        """Release the library; safe to call twice."""
        ...


class NoneBackend:
    """The backend used when no GPU library works: zero GPUs, with the reasons.

    Args:
        reasons: One line per backend that was tried and why it failed.
    """

    name = "none"

    def __init__(self, reasons: list[str] | tuple[str, ...] = ()) -> None:
        self._reasons = tuple(reasons)

    @property
    def reasons(self) -> tuple[str, ...]:
        return self._reasons

    @property
    def description(self) -> str:
        if not self._reasons:
            return "No GPU visible (telemetry disabled)."
        return "No GPU visible: " + "; ".join(self._reasons)

    def open(self) -> None:
        return None

    def count(self) -> int:
        return 0

    def snapshot(self, index: int) -> GpuSnapshot:
        raise IndexError(f"GPU {index} does not exist: {self.description}")

    def close(self) -> None:
        return None
