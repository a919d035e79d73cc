"""The NVML backend maps pynvml's answers (via the FAKE pynvml) correctly."""

from __future__ import annotations

import pytest

from tests.fakes import fake_pynvml
from tuner.telemetry.base import BackendUnavailable
from tuner.telemetry.nvidia import NvmlBackend
from tuner.telemetry.types import GpuProcess, GpuSnapshot

GIB = 1024**3


def _open() -> tuple[NvmlBackend, object]:
    mod = fake_pynvml.make_module()
    backend = NvmlBackend(mod)
    backend.open()
    return backend, mod


def test_h100_every_field() -> None:
    backend, _ = _open()
    try:
        assert backend.count() == 8
        assert backend.snapshot(0) == GpuSnapshot(
            index=0,
            name="NVIDIA H100 80GB HBM3",
            arch="sm_90",
            gfx_activity=99.0,
            umc_activity=47.0,
            vram_used=76 * GIB,
            vram_total=80 * GIB,
            power_w=652.431,  # mW -> W
            power_cap_w=700.0,
            temp_edge=63.0,
            temp_hotspot=None,  # NVML has no hotspot sensor
            temp_mem=71.0,  # field value NVML_FI_DEV_MEMORY_TEMP
            gfx_clock_mhz=1980.0,
            mem_clock_mhz=2619.0,
            compute_partition="MIG off",
            memory_partition=None,
            throttle="none",
            processes=(GpuProcess(pid=7000, name="python3", vram_bytes=75 * GIB),),
            error=None,
        )
        assert backend.snapshot(4).throttle == "idle"
    finally:
        backend.close()


def test_nvml_errors_become_none_for_that_metric() -> None:
    backend, _ = _open()
    try:
        mig = backend.snapshot(1)
        assert (mig.gfx_activity, mig.umc_activity) == (None, None)  # NOT_SUPPORTED under MIG
        assert mig.compute_partition == "MIG on"
        assert mig.processes == (GpuProcess(pid=7101, name="vllm", vram_bytes=None),)
        assert backend.snapshot(2).processes is None  # NO_PERMISSION
        capped = backend.snapshot(3)
        assert capped.throttle == "power cap"
        assert capped.temp_mem is None  # field returned NOT_SUPPORTED
    finally:
        backend.close()


def test_lost_gpu_is_an_error_for_that_gpu_only() -> None:
    backend, _ = _open()
    try:
        lost = backend.snapshot(7)
        assert lost.error is not None and "GPU is lost" in lost.error
        assert lost.power_w is None and lost.name is None
        assert backend.snapshot(6).error is None
    finally:
        backend.close()


def test_lifecycle_init_once_shutdown_once() -> None:
    backend, mod = _open()
    backend.close()
    backend.close()
    assert (mod.init_count, mod.shutdown_count) == (1, 1)


def test_library_missing_reason() -> None:
    mod = fake_pynvml.make_module()

    def no_lib() -> None:
        raise fake_pynvml.NVMLError(fake_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    mod.nvmlInit = no_lib
    with pytest.raises(BackendUnavailable, match=r"^NVML: libnvidia-ml\.so\.1 not found"):
        NvmlBackend(mod).open()
