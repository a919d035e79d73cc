"""The amdsmi backend maps the library's answers (via the FAKE amdsmi) correctly.

Each expected value below is derived by hand from the canned responses in
tests/fakes/fake_amdsmi.py: MiB -> bytes, µW -> W, "N/A"/UINT32_MAX -> None,
exceptions -> None for that metric (or ``error`` for a GPU that fails whole).
"""

from __future__ import annotations

import pytest

from tests.fakes import fake_amdsmi
from tuner.telemetry.amd import AmdSmiBackend
from tuner.telemetry.base import BackendUnavailable
from tuner.telemetry.types import GpuProcess, GpuSnapshot

MIB = 1024 * 1024


def _open(node: str) -> tuple[AmdSmiBackend, object]:
    mod = fake_amdsmi.make_module(node)
    backend = AmdSmiBackend(mod)
    backend.open()
    return backend, mod


def test_mi300x_amdsmi6_every_field() -> None:
    backend, _mod = _open("mi300x")
    try:
        assert backend.count() == 8
        assert backend.description == "amdsmi: 8 AMD GPUs"
        snap = backend.snapshot(0)
        assert snap == GpuSnapshot(
            index=0,
            name="AMD Instinct MI300X",
            arch="gfx942",
            gfx_activity=97.0,
            umc_activity=41.0,
            vram_used=180_224 * MIB,
            vram_total=196_592 * MIB,
            power_w=612.0,  # 6.x: current_socket_power; average is "N/A"
            power_cap_w=750.0,  # power_limit in W on 6.x
            temp_edge=None,  # NOT_SUPPORTED on MI300X, metrics say "N/A" too
            temp_hotspot=58.0,
            temp_mem=49.0,
            gfx_clock_mhz=2100.0,
            mem_clock_mhz=1300.0,
            compute_partition="SPX",  # 6.2 has no accelerator profile: deprecated API used
            memory_partition="NPS1",
            throttle=None,  # no violation API on 6.2, metrics throttle fields "N/A"
            processes=(GpuProcess(pid=4242, name="python3", vram_bytes=179 * 1024 * MIB),),
            error=None,
        )
        idle = backend.snapshot(5)
        assert idle.gfx_activity == 0.0  # a real idle zero stays a zero
        assert idle.processes == ()  # readable and empty, not unknown
        assert idle.power_w == 146.0
    finally:
        backend.close()


def test_mi300x_per_metric_failures_stay_local() -> None:
    backend, _ = _open("mi300x")
    try:
        no_perm = backend.snapshot(2)
        assert no_perm.processes is None  # NO_PERM -> unknown, not "no processes"
        assert no_perm.error is None
        assert no_perm.gfx_activity == 97.0 and no_perm.power_w == 614.0
        no_umc = backend.snapshot(3)
        assert no_umc.umc_activity is None  # "N/A" in activity and in the metrics table
        assert no_umc.gfx_activity == 97.0
    finally:
        backend.close()


def test_mi355x_amdsmi7_every_field() -> None:
    backend, mod = _open("mi355x")
    try:
        snap = backend.snapshot(0)
        assert snap == GpuSnapshot(
            index=0,
            name="AMD Instinct MI355X",
            arch="gfx950",
            gfx_activity=88.0,
            umc_activity=63.0,
            vram_used=270_336 * MIB,
            vram_total=294_896 * MIB,
            power_w=1012.0,  # 7.x socket_power; average_socket_power is UINT32_MAX
            power_cap_w=1400.0,  # power_limit 1_400_000_000 µW
            temp_edge=None,
            temp_hotspot=71.0,
            temp_mem=62.0,
            gfx_clock_mhz=2400.0,
            mem_clock_mhz=2000.0,
            compute_partition="SPX",
            memory_partition="NPS1",
            throttle="power",  # violation status: active_ppt_pwr
            processes=(GpuProcess(pid=9100, name="vllm", vram_bytes=263 * 1024 * MIB),),
            error=None,
        )
        # GPU 0 used the accelerator profile, not the deprecated call.
        assert ("amdsmi_get_gpu_compute_partition", 0) not in mod.calls
    finally:
        backend.close()


def test_mi355x_fallbacks_and_sentinels() -> None:
    backend, mod = _open("mi355x")
    try:
        gpu1 = backend.snapshot(1)
        assert gpu1.compute_partition == "SPX"  # profile "N/A" -> deprecated API
        assert ("amdsmi_get_gpu_compute_partition", 1) in mod.calls
        assert gpu1.throttle == "none"

        gpu2 = backend.snapshot(2)
        assert gpu2.gfx_clock_mhz == 2390.0  # clock "N/A" -> metrics current_gfxclk

        gpu4 = backend.snapshot(4)
        assert gpu4.power_cap_w == 1400.0  # power_limit "N/A" -> power_cap_info µW

        gpu6 = backend.snapshot(6)
        assert gpu6.vram_used is None  # raw UINT32_MAX is a sentinel, not 4 PiB
        assert gpu6.vram_total == 294_896 * MIB

        gpu7 = backend.snapshot(7)
        assert gpu7.throttle == "none"  # violation NOT_SUPPORTED -> metrics throttle_status False
    finally:
        backend.close()


def test_broken_gpu_is_an_error_for_that_gpu_only() -> None:
    backend, _ = _open("mi355x")
    try:
        broken = backend.snapshot(5)
        assert broken.error == "amdsmi: AMDSMI_STATUS_DRM_ERROR"
        assert broken.to_dict() | {"index": 0, "error": None} == GpuSnapshot(index=0).to_dict()
        assert [backend.snapshot(i).error for i in (4, 6)] == [None, None]
    finally:
        backend.close()


def test_init_once_shutdown_once() -> None:
    backend, mod = _open("mi355x")
    for i in range(backend.count()):
        backend.snapshot(i)
    backend.close()
    backend.close()
    assert (mod.init_count, mod.shutdown_count) == (1, 1)


def test_static_names_read_once() -> None:
    backend, mod = _open("mi300x")
    try:
        for _ in range(3):
            backend.snapshot(0)
        assert mod.calls.count(("amdsmi_get_gpu_asic_info", 0)) == 1
    finally:
        backend.close()


def test_init_failure_is_a_reason() -> None:
    mod = fake_amdsmi.make_module("mi300x")

    def failing_init(flag: object) -> None:
        raise fake_amdsmi.AmdSmiLibraryException(34)  # DRIVER_NOT_LOADED has no text in the fake

    mod.amdsmi_init = failing_init
    with pytest.raises(BackendUnavailable, match=r"^amdsmi: init failed"):
        AmdSmiBackend(mod).open()


def test_no_devices_is_a_reason_and_shuts_down() -> None:
    mod = fake_amdsmi.make_module("mi300x")
    mod.amdsmi_get_processor_handles = lambda: []
    with pytest.raises(BackendUnavailable, match="no AMD GPU found"):
        AmdSmiBackend(mod).open()
    assert mod.shutdown_count == 1


def test_to_dict_is_json_ready() -> None:
    import json

    backend, _ = _open("mi300x")
    try:
        data = backend.snapshot(0).to_dict()
        assert json.loads(json.dumps(data))["processes"][0]["pid"] == 4242
        assert data["temp_edge"] is None
    finally:
        backend.close()
