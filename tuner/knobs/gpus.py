"""GPU targets by name: memory, architecture and a node's usual count.

``tunelab check --gpu MI300X`` plans for a machine that is not this one; on a
live node the name comes from telemetry (``GpuSnapshot.name``, e.g. "AMD
Instinct MI300X") and :func:`from_telemetry_name` maps it here. The rules read
the architecture (MXFP4 is native on gfx950 only: vLLM 0.32
``platforms/rocm.py`` ``supports_mx()`` line 1180) and the memory (fit,
vLLM's batch defaults by device size).

Memory is what the runtime reports (``torch.cuda.get_device_properties``), in
GiB: MI300X 192 GB HBM3 reads 191.98 GiB, H100 80 GB reads 79.19 GiB.

Partition modes (reference 004 §5 and §CPX mode): an MI300X in CPX mode shows
8 GPUs of one XCD each with 1/8 of the memory (24 GB in CPX/NPS4). Write
``MI300X-CPX`` for such a target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tuner.errors import TunelabError


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model (or partition of one).

    Attributes:
        name: Canonical short name ("MI300X", "H100").
        platform: "rocm" or "cuda".
        arch: gfx942 / gfx950 / sm_90 / sm_100 ...
        hbm_gib: Memory of one device as the runtime reports it.
        count: Devices on a usual node of this kind (8 for OAM/HGX boards).
        partition: "CPX" (or another compute partition) when the device is a partition.
        hbm_tb_s: Peak memory bandwidth of one device, TB/s (the vendor's datasheet;
            None where it is not published): the study model's prior for a decode step.
        bf16_tflops: Peak dense BF16 matrix throughput of one device, TFLOP/s (the
            datasheet's figure without sparsity; None where not published): its prior for
            a prefilled token.
    """

    name: str
    platform: str
    arch: str
    hbm_gib: float
    count: int = 8
    partition: str | None = None
    hbm_tb_s: float | None = None
    bf16_tflops: float | None = None

    @property
    def label(self) -> str:
        """How messages name it ("MI300X (CPX partition)")."""
        return f"{self.name} ({self.partition} partition)" if self.partition else self.name


GPUS: dict[str, GpuSpec] = {
    spec.name: spec
    for spec in (
        # name, platform, arch, HBM GiB, count, hbm_tb_s=..., bf16_tflops=... (datasheets)
        GpuSpec("MI210", "rocm", "gfx90a", 63.98, 4, hbm_tb_s=1.6, bf16_tflops=181.0),
        # one GCD of two: half the OAM's 3.2 TB/s and 383 TFLOP/s
        GpuSpec("MI250X", "rocm", "gfx90a", 63.98, 8, hbm_tb_s=1.6, bf16_tflops=191.5),
        GpuSpec("MI300X", "rocm", "gfx942", 191.98, hbm_tb_s=5.3, bf16_tflops=1307.4),
        GpuSpec("MI300A", "rocm", "gfx942", 128.0, 4, hbm_tb_s=5.3, bf16_tflops=980.6),
        GpuSpec("MI308X", "rocm", "gfx942", 191.98),
        GpuSpec("MI325X", "rocm", "gfx942", 255.98, hbm_tb_s=6.0, bf16_tflops=1307.4),
        GpuSpec("MI350X", "rocm", "gfx950", 287.98, hbm_tb_s=8.0, bf16_tflops=2300.0),
        GpuSpec("MI355X", "rocm", "gfx950", 287.98, hbm_tb_s=8.0, bf16_tflops=2500.0),
        GpuSpec("A100", "cuda", "sm_80", 79.15, hbm_tb_s=2.039, bf16_tflops=312.0),
        GpuSpec("L40S", "cuda", "sm_89", 44.39, hbm_tb_s=0.864, bf16_tflops=362.0),
        GpuSpec("H100", "cuda", "sm_90", 79.19, hbm_tb_s=3.35, bf16_tflops=989.0),
        GpuSpec("H200", "cuda", "sm_90", 139.8, hbm_tb_s=4.8, bf16_tflops=989.0),
        GpuSpec("GH200", "cuda", "sm_90", 94.5, 1, hbm_tb_s=4.0, bf16_tflops=989.0),
        GpuSpec("B200", "cuda", "sm_100", 178.4, hbm_tb_s=8.0, bf16_tflops=2250.0),
        GpuSpec("GB200", "cuda", "sm_100", 184.0, 4, hbm_tb_s=8.0, bf16_tflops=2500.0),
        GpuSpec("B300", "cuda", "sm_103", 268.0, hbm_tb_s=8.0),
    )
}

# XCDs per device: a CPX partition is one XCD (004 §Introduction, §5).
_XCDS = {"gfx942": 8, "gfx950": 8}
_PARTITIONS = {"CPX", "DPX", "QPX", "SPX"}
_SPLIT = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}


class GpuNameError(TunelabError, ValueError):
    """A ``--gpu`` value tunelab does not know; the message lists the known ones."""


def lookup(text: str) -> GpuSpec:
    """The spec for ``--gpu`` text: ``MI300X``, ``8xMI300X``, ``MI300X:4``, ``MI300X-CPX``.

    Raises:
        GpuNameError: for an unknown name or a malformed count.
    """
    raw = text.strip()
    count: int | None = None
    match = re.fullmatch(r"(\d+)\s*[xX]\s*(.+)", raw)
    if match:
        count, raw = int(match.group(1)), match.group(2)
    elif ":" in raw:
        raw, _, tail = raw.partition(":")
        if not tail.isdigit() or int(tail) < 1:
            raise GpuNameError(f"--gpu {text!r}: write a count like MI300X:8 or 8xMI300X")
        count = int(tail)
    name, partition = _split_partition(raw)
    spec = _by_name(name)
    if spec is None:
        known = ", ".join(GPUS)
        raise GpuNameError(f"--gpu {text!r}: unknown GPU; known: {known}")
    if partition and partition != "SPX":
        parts = _SPLIT[partition]
        if spec.arch not in _XCDS:
            raise GpuNameError(f"--gpu {text!r}: {spec.name} has no {partition} partition mode")
        spec = replace(
            spec,
            hbm_gib=round(spec.hbm_gib / parts, 2),
            count=spec.count * parts,
            partition=partition,
            hbm_tb_s=spec.hbm_tb_s / parts if spec.hbm_tb_s else None,
            bf16_tflops=spec.bf16_tflops / parts if spec.bf16_tflops else None,
        )
    return replace(spec, count=count) if count else spec


def _split_partition(raw: str) -> tuple[str, str | None]:
    head, sep, tail = raw.replace("_", "-").rpartition("-")
    if sep and tail.upper() in _PARTITIONS:
        return head, tail.upper()
    return raw, None


def _by_name(name: str) -> GpuSpec | None:
    key = re.sub(r"[^A-Z0-9]", "", name.upper())
    for spec in GPUS.values():
        if re.sub(r"[^A-Z0-9]", "", spec.name) == key:
            return spec
    return None


def from_telemetry_name(name: str | None) -> GpuSpec | None:
    """The spec for a driver's marketing name ("AMD Instinct MI300X", "NVIDIA H100 80GB HBM3").

    Longer names are tried first so "GH200" is not read as "H200" and "MI300X" not as "MI300A".
    """
    if not name:
        return None
    upper = name.upper()
    for spec in sorted(GPUS.values(), key=lambda s: len(s.name), reverse=True):
        if re.search(rf"(?<![A-Z0-9]){re.escape(spec.name)}(?![0-9])", upper):
            return spec
    return None
