"""`tunelab doctor`: the facts a user checks first, gathered without importing vLLM.

Python and tunelab versions, which vLLM the engine will use (version,
platform, how it is started — asked of that interpreter in a subprocess and
cached per installation), where the catalogue and that vLLM disagree, which
GPUs are visible (or why none), and where the demo model lives.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from tuner import __version__


@dataclass
class DoctorReport:
    """Everything `tunelab doctor` prints, as data (also its --json form)."""

    python: str
    python_version: str
    tunelab_version: str
    node: str
    vllm: dict[str, Any]
    vllm_lines: list[str]
    differences: list[dict[str, Any]]
    gpu_backend: str
    gpu_count: int
    gpu_lines: list[str]
    demo_model: str | None
    demo_model_built: bool
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gather(
    python: str = sys.executable, *, refresh: bool = False, telemetry: str = "auto"
) -> DoctorReport:
    """Collects the report; every part that fails becomes a line, never an exception."""
    from tuner.demo_model import demo_model_dir
    from tuner.introspect import IntrospectError, introspect

    problems: list[str] = []
    try:
        info = introspect(python, refresh=refresh)
        vllm = info.to_dict()
        vllm_lines = info.summary_lines()
        if not info.available:
            problems.append(info.error or "vLLM is not importable")
    except IntrospectError as exc:
        vllm = {"python": python, "version": None, "error": str(exc)}
        vllm_lines = [f"vLLM: cannot run {python}: {exc}"]
        problems.append(str(exc))
        info = None
    differences: list[dict[str, Any]] = []
    if info is not None and info.available:
        from tuner.introspect_compare import compare_with_catalogue

        differences = [d.to_dict() for d in compare_with_catalogue(info)]

    gpu_backend, gpu_count, gpu_lines = _gpus(telemetry)
    demo = demo_model_dir()
    return DoctorReport(
        python=sys.executable,
        python_version=platform.python_version(),
        tunelab_version=__version__,
        node=platform.node(),
        vllm=vllm,
        vllm_lines=vllm_lines,
        differences=differences,
        gpu_backend=gpu_backend,
        gpu_count=gpu_count,
        gpu_lines=gpu_lines,
        demo_model=str(demo),
        demo_model_built=(demo / "config.json").is_file(),
        problems=problems,
    )


def _gpus(choice: str) -> tuple[str, int, list[str]]:
    from tuner.telemetry.select import select_backend

    backend = select_backend(choice)
    try:
        count = backend.count()
        lines = [backend.description]
        if count:
            for i in range(count):
                snap = backend.snapshot(i)
                lines.append(f"GPU {i}: {snap.name or 'N/A'} ({snap.arch or 'arch N/A'})")
        else:
            lines.extend(f"  {reason}" for reason in backend.reasons)
        return backend.name, count, lines
    finally:
        backend.close()
