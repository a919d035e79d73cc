"""Pick the telemetry backend: AMD first, then NVIDIA, else "none" with reasons.

AMD comes first because tunelab is built for Instinct nodes. Selection opens
the backend (that is where a missing library or driver shows), so the
returned backend is ready to read. Nothing is printed, ever: every failure
is kept as a one-line reason on the :class:`NoneBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from tuner.telemetry.amd import AmdSmiBackend
from tuner.telemetry.base import Backend, BackendUnavailable, NoneBackend
from tuner.telemetry.nvidia import NvmlBackend

BackendChoice = Literal["auto", "amd", "nvidia", "none"]
CHOICES: tuple[str, ...] = ("auto", "amd", "nvidia", "none")


def _amd() -> Backend:

    return AmdSmiBackend()


def _nvidia() -> Backend:

    return NvmlBackend()


FACTORIES: dict[str, Callable[[], Backend]] = {"amd": _amd, "nvidia": _nvidia}


def select_backend(choice: str = "auto") -> Backend:
    """Open and return the first backend that works.

    Args:
        choice: "auto" (AMD, then NVIDIA), "amd", "nvidia", or "none".

    Returns:
        An opened backend; a :class:`NoneBackend` carrying the reasons when
        no requested backend could open.

    Raises:
        ValueError: For an unknown choice (the message lists the valid ones).
    """
    if choice not in CHOICES:
        raise ValueError(
            f"unknown telemetry backend {choice!r}; choose one of: {', '.join(CHOICES)}"
        )
    if choice == "none":
        return NoneBackend(["telemetry disabled (--backend none)"])
    order = ["amd", "nvidia"] if choice == "auto" else [choice]
    reasons: list[str] = []
    for kind in order:
        try:
            backend = FACTORIES[kind]()
            backend.open()
        except BackendUnavailable as exc:
            reasons.append(str(exc))
            continue
        except Exception as exc:  # a library bug must not take the app down
            reasons.append(f"{kind}: unexpected {type(exc).__name__}: {exc}")
            continue
        return backend
    return NoneBackend(reasons)
