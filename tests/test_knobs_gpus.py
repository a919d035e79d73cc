"""GPU targets by name (tuner.knobs.gpus): --gpu text, telemetry names, CPX partitions."""

from __future__ import annotations

import pytest

from tuner.knobs.gpus import GpuNameError, from_telemetry_name, lookup
from tuner.rules import Target


@pytest.mark.parametrize(
    ("text", "name", "arch", "gib", "count"),
    [
        ("MI300X", "MI300X", "gfx942", 191.98, 8),
        ("mi325x", "MI325X", "gfx942", 255.98, 8),
        ("MI355X:4", "MI355X", "gfx950", 287.98, 4),
        ("2xH100", "H100", "sm_90", 79.19, 2),
        ("B200", "B200", "sm_100", 178.4, 8),
    ],
)
def test_lookup(text: str, name: str, arch: str, gib: float, count: int) -> None:
    spec = lookup(text)
    assert (spec.name, spec.arch, spec.hbm_gib, spec.count) == (name, arch, gib, count)


def test_cpx_partition_divides_memory_and_multiplies_devices() -> None:
    # 004 §5: CPX/NPS4 gives 24 GB per partition; 8 XCD partitions per MI300X.
    spec = lookup("MI300X-CPX")
    assert spec.partition == "CPX" and spec.hbm_gib == pytest.approx(24.0, abs=0.01)
    assert spec.count == 64
    with pytest.raises(GpuNameError, match="no CPX"):
        lookup("H100-CPX")


@pytest.mark.parametrize("bad", ["MI999X", "MI300X:0", "MI300X:x"])
def test_bad_names(bad: str) -> None:
    with pytest.raises(GpuNameError):
        lookup(bad)


@pytest.mark.parametrize(
    ("driver_name", "expected"),
    [
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("AMD Instinct MI355X", "MI355X"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA H200", "H200"),
        ("Some Other GPU", None),
        (None, None),
    ],
)
def test_from_telemetry_name(driver_name: str | None, expected: str | None) -> None:
    spec = from_telemetry_name(driver_name)
    assert (spec.name if spec else None) == expected


def test_target_with_gpu_keeps_explicit_values() -> None:
    target = Target("0.33.0", None).with_gpu(lookup("MI300X"), gpus=2, vram_gib=100.0)
    assert target.platform == "rocm" and target.gpu_arch == "gfx942"
    assert target.gpus == 2 and target.vram_gib == 100.0
    assert Target("0.33.0", "rocm").with_gpu(None) == Target("0.33.0", "rocm")
