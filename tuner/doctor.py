"""`tunelab doctor`: the facts a user checks first, gathered without importing vLLM.

Python and tunelab versions, which vLLM the engine will use (version,
platform, how it is started — asked of that interpreter in a subprocess and
cached per installation), where the catalogue and that vLLM disagree, which
GPUs are visible (or why none), host settings that cost GPU performance
(NUMA auto-balancing), and where the demo model lives.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tuner import __version__
from tuner.demo_model import demo_model_dir
from tuner.introspect import IntrospectError, introspect
from tuner.telemetry.select import select_backend

NUMA_BALANCING_PATH = Path("/proc/sys/kernel/numa_balancing")
_NUMA_SOURCE = (
    "Serving LLMs on AMD MI300X: Best Practices §Case 5 (Disabling NUMA Balancing); "
    "vLLM FP8 benchmarks on the AMD Instinct MI300X §System optimization"
)


class HostState(StrEnum):
    """How a host setting stands: as the guides want it, against them, or unknown."""

    OK = "ok"
    WARNING = "warning"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class HostCheck:
    """One host setting that matters to GPU serving.

    Attributes:
        name: The setting (``kernel.numa_balancing``).
        state: See HostState.
        value: What the host reports, None when it cannot be read.
        message: A sentence saying what it means and how to fix it.
        source: Where the advice comes from.
    """

    name: str
    state: HostState
    value: str | None
    message: str
    source: str


def numa_balancing_check(path: Path | None = None) -> HostCheck:
    """NUMA auto-balancing must be 0 on a GPU node: the kernel migrating pages
    between NUMA nodes under the GPU's DMA costs throughput (both AMD guides ask
    for ``cat /proc/sys/kernel/numa_balancing`` to print 0).

    Args:
        path: The sysctl file (injectable for tests).
    """
    name = "kernel.numa_balancing"
    path = path or NUMA_BALANCING_PATH
    try:
        value = path.read_text().strip()
    except OSError as exc:
        return HostCheck(
            name,
            HostState.UNKNOWN,
            None,
            f"not readable ({path}: {exc.strerror or exc}); on a GPU node check that "
            "`cat /proc/sys/kernel/numa_balancing` prints 0",
            _NUMA_SOURCE,
        )
    if value == "0":
        return HostCheck(name, HostState.OK, value, "NUMA auto-balancing is off (0)", _NUMA_SOURCE)
    return HostCheck(
        name,
        HostState.WARNING,
        value,
        f"NUMA auto-balancing is on ({value}): on a GPU node it costs throughput; turn it "
        "off with `sudo sysctl -w kernel.numa_balancing=0` "
        "(or `sh -c 'echo 0 > /proc/sys/kernel/numa_balancing'`)",
        _NUMA_SOURCE,
    )


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
    host_checks: list[HostCheck] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gather(
    python: str = sys.executable,
    *,
    refresh: bool = False,
    telemetry: str = "auto",
    numa_balancing_path: Path | None = None,
) -> DoctorReport:
    """Collects the report; every part that fails becomes a line, never an exception."""
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
        # Deferred: only `doctor --compare` needs the catalogue comparison.
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
        host_checks=[numa_balancing_check(numa_balancing_path or NUMA_BALANCING_PATH)],
    )


def _gpus(choice: str) -> tuple[str, int, list[str]]:

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
