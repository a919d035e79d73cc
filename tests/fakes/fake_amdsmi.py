"""FAKE ``amdsmi`` module: canned responses in the real library's shapes.

No AMD GPU exists on the development machines or in CI, so the amdsmi
backend is tested against this stand-in at the library boundary. It offers
the same function, enum and exception names as the real ``amdsmi`` package
and returns what ``amdsmi_interface.py`` returns: dicts with "N/A" strings
where the Python layer converts 0xFFFF/UINT32_MAX, raw all-ones sentinels
where it does not (``amdsmi_get_power_info`` only checks 0xFFFF, so a 7.x
UINT32_MAX passes through; ``amdsmi_get_gpu_vram_usage`` checks nothing),
``AmdSmiLibraryException`` for unsupported sensors and broken devices.

Two nodes, eight GPUs each (values typical of the hardware, built from the
documented shapes, not a byte-for-byte capture of one machine):

* ``mi300x`` — amdsmi 6.2 era: ``current_socket_power`` (no ``socket_power``),
  ``power_limit`` in W, no accelerator-partition or violation-status API,
  no edge sensor (NOT_SUPPORTED), GPU 2 refuses its process list (NO_PERM),
  GPU 3 has no UMC activity anywhere.
* ``mi355x`` — amdsmi 7.x: ``socket_power``, ``average_socket_power`` at
  UINT32_MAX, ``power_limit`` in µW (GPU 4 "N/A", falling back to the µW
  power cap), accelerator partition profile (GPU 1 "N/A", falling back to the
  deprecated compute partition), violation status (GPU 0 power-throttled,
  GPU 7 unsupported), GPU 5 raises DRM_ERROR on every call, GPU 6 reports
  UINT32_MAX VRAM used, GPU 2 has "N/A" GFX clock (metrics table fills it).

Use :func:`make_module` to get a fresh module object per test.
"""

from __future__ import annotations

import types
from enum import IntEnum
from typing import Any

AMDSMI_STATUS_SUCCESS = 0
AMDSMI_STATUS_INVAL = 1
AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_DRM_ERROR = 6
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_NOT_INIT = 32

_ERR_INFO = {
    AMDSMI_STATUS_INVAL: "AMDSMI_STATUS_INVAL - Invalid parameters",
    AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    AMDSMI_STATUS_DRM_ERROR: "AMDSMI_STATUS_DRM_ERROR - Error when called libdrm",
    AMDSMI_STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
    AMDSMI_STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
}

UINT16_MAX = 0xFFFF
UINT32_MAX = 0xFFFFFFFF
MIB = 1024 * 1024


class AmdSmiException(Exception):
    """Base class, as in amdsmi_exception.py."""


class AmdSmiLibraryException(AmdSmiException):
    """Same surface as the real one: err_code, err_info, get_error_info()."""

    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = _ERR_INFO.get(
            err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred"
        )

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_info(self, detailed: bool = True) -> str:
        return self.err_info if detailed else self.err_info.split(" - ")[0]

    def get_error_code(self) -> int:
        return self.err_code


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2
    INIT_NON_AMD_CPUS = 4
    INIT_NON_AMD_GPUS = 8


class AmdSmiTemperatureType(IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2
    HBM_0 = 3
    HBM_1 = 4
    HBM_2 = 5
    HBM_3 = 6
    PLX = 7


class AmdSmiTemperatureMetric(IntEnum):
    CURRENT = 0
    MAX = 1
    MIN = 2
    CRITICAL = 5


class AmdSmiClkType(IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5


class FakeProcessorHandle:
    """Stands in for the ctypes ``amdsmi_processor_handle``."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<fake amdsmi handle {self.index}>"


_UNSUPPORTED = object()  # a GPU without an answer for a call: NOT_SUPPORTED, as recorded


def _err(code: int) -> AmdSmiLibraryException:
    return AmdSmiLibraryException(code)


def _clk(clk: Any, lo: int, hi: int) -> dict[str, Any]:
    return {"clk": clk, "min_clk": lo, "max_clk": hi, "clk_locked": False, "clk_deep_sleep": "N/A"}


def _proc(pid: int, name: str, vram: int, *, v7: bool) -> dict[str, Any]:
    proc: dict[str, Any] = {
        "name": name,
        "pid": pid,
        "mem": vram,
        "engine_usage": {"gfx": 812_345_000, "enc": 0},
        "memory_usage": {"gtt_mem": 2 * MIB, "cpu_mem": 40 * MIB, "vram_mem": vram},
    }
    if v7:
        proc["cu_occupancy"] = "N/A"
    return proc


def _mi300x_gpu(i: int) -> dict[Any, Any]:
    busy = i < 4  # GPUs 0-3 run a TP=4 vLLM engine
    gfx, umc = (97, 41) if busy else (0, 0)
    power = 612 + i if busy else 141 + i
    used_mib = 180_224 if busy else 283
    r: dict[Any, Any] = {
        "amdsmi_get_gpu_asic_info": {
            "market_name": "AMD Instinct MI300X",
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": "0x74a1",
            "rev_id": "0x00",
            "asic_serial": f"0x{0x5B3F2A10C9D8E700 + i:016X}",
            "oam_id": i,
            "num_compute_units": 304,
            "target_graphics_version": "gfx942",
        },
        "amdsmi_get_gpu_vram_usage": {"vram_total": 196_592, "vram_used": used_mib},
        "amdsmi_get_gpu_activity": {"gfx_activity": gfx, "umc_activity": umc, "mm_activity": "N/A"},
        # 6.2: no socket_power key; MI300 fills current_socket_power, average is 0xFFFF -> "N/A".
        "amdsmi_get_power_info": {
            "current_socket_power": power,
            "average_socket_power": "N/A",
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": 750,
        },
        "amdsmi_get_power_cap_info": {
            "power_cap": 750_000_000,
            "default_power_cap": 750_000_000,
            "dpm_cap": 0,
            "min_power_cap": 0,
            "max_power_cap": 750_000_000,
        },
        ("amdsmi_get_temp_metric", "EDGE"): _err(AMDSMI_STATUS_NOT_SUPPORTED),
        ("amdsmi_get_temp_metric", "HOTSPOT"): 58 + i if busy else 40 + i,
        ("amdsmi_get_temp_metric", "VRAM"): 49 if busy else 35,
        ("amdsmi_get_clock_info", "GFX"): _clk(2100 if busy else 132, 500, 2100),
        ("amdsmi_get_clock_info", "MEM"): _clk(1300, 900, 1300),
        "amdsmi_get_gpu_compute_partition": "SPX",
        "amdsmi_get_gpu_memory_partition": "NPS1",
        "amdsmi_get_gpu_metrics_info": {
            "temperature_edge": "N/A",
            "temperature_hotspot": 58 + i if busy else 40 + i,
            "temperature_mem": 49 if busy else 35,
            "average_gfx_activity": gfx,
            "average_umc_activity": umc,
            "average_socket_power": "N/A",
            "current_socket_power": power,
            "current_gfxclk": "N/A",
            "current_uclk": 1300,
            "throttle_status": "N/A",
            "indep_throttle_status": "N/A",
            "temperature_hbm": ["N/A", "N/A", "N/A", "N/A"],
        },
        "amdsmi_get_gpu_process_list": [_proc(4242 + i, "python3", 179 * 1024 * MIB, v7=False)]
        if busy
        else [],
    }
    if i == 2:
        r["amdsmi_get_gpu_process_list"] = _err(AMDSMI_STATUS_NO_PERM)
    if i == 3:
        r["amdsmi_get_gpu_activity"] = {
            "gfx_activity": gfx,
            "umc_activity": "N/A",
            "mm_activity": "N/A",
        }
        r["amdsmi_get_gpu_metrics_info"]["average_umc_activity"] = "N/A"
    return r


def _mi355x_gpu(i: int) -> dict[Any, Any]:
    busy = i % 2 == 0
    gfx, umc = (88, 63) if busy else (3, 1)
    power = 1012 + i if busy else 236 + i
    used_mib = 270_336 if busy else 512
    r: dict[Any, Any] = {
        "amdsmi_get_gpu_asic_info": {
            "market_name": "AMD Instinct MI355X",
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": "0x75a3",
            "rev_id": "0x00",
            "asic_serial": f"0x{0x7E11D0C0FFEE0000 + i:016X}",
            "oam_id": i,
            "num_compute_units": 256,
            "target_graphics_version": "gfx950",
        },
        "amdsmi_get_gpu_vram_usage": {"vram_total": 294_896, "vram_used": used_mib},
        "amdsmi_get_gpu_activity": {"gfx_activity": gfx, "umc_activity": umc, "mm_activity": "N/A"},
        # 7.x: socket_power is the field; unsupported members are UINT32_MAX, which the
        # Python layer does not convert (it only checks 0xFFFF); power_limit in µW.
        "amdsmi_get_power_info": {
            "socket_power": power,
            "current_socket_power": power,
            "average_socket_power": UINT32_MAX,
            "gfx_voltage": UINT32_MAX,
            "soc_voltage": UINT32_MAX,
            "mem_voltage": UINT32_MAX,
            "power_limit": 1_400_000_000,
        },
        "amdsmi_get_power_cap_info": {
            "power_cap": 1_400_000_000,
            "default_power_cap": 1_400_000_000,
            "dpm_cap": 0,
            "min_power_cap": 0,
            "max_power_cap": 1_400_000_000,
        },
        ("amdsmi_get_temp_metric", "EDGE"): _err(AMDSMI_STATUS_NOT_SUPPORTED),
        ("amdsmi_get_temp_metric", "HOTSPOT"): 71 if busy else 44,
        ("amdsmi_get_temp_metric", "VRAM"): 62 if busy else 39,
        ("amdsmi_get_clock_info", "GFX"): _clk(2400 if busy else 250, 500, 2400),
        ("amdsmi_get_clock_info", "MEM"): _clk(2000, 900, 2000),
        "amdsmi_get_gpu_accelerator_partition_profile": {
            "partition_id": [0],
            "partition_profile": {
                "profile_type": "SPX",
                "num_partitions": 1,
                "profile_index": 0,
                "memory_caps": ["NPS1", "NPS2"],
                "num_resources": 4,
                "resources": "N/A",
            },
        },
        "amdsmi_get_gpu_compute_partition": "SPX",
        "amdsmi_get_gpu_memory_partition": "NPS1",
        "amdsmi_get_violation_status": {
            "acc_counter": 123_456,
            "per_ppt_pwr": 12 if i == 0 else 0,
            "active_prochot_thrm": False,
            "active_ppt_pwr": i == 0,
            "active_socket_thrm": False,
            "active_vr_thrm": False,
            "active_hbm_thrm": False,
        },
        "amdsmi_get_gpu_metrics_info": {
            "temperature_edge": "N/A",
            "temperature_hotspot": 71 if busy else 44,
            "temperature_mem": 62 if busy else 39,
            "average_gfx_activity": gfx,
            "average_umc_activity": umc,
            "average_socket_power": "N/A",
            "current_socket_power": power,
            "current_gfxclk": 2390 if busy else 250,
            "current_uclk": 2000,
            "throttle_status": False,
            "indep_throttle_status": "N/A",
            "temperature_hbm": [60, 62, 61, 59] if busy else [38, 39, 37, 38],
        },
        "amdsmi_get_gpu_process_list": [_proc(9100 + i, "vllm", 263 * 1024 * MIB, v7=True)]
        if busy
        else [],
    }
    if i == 1:
        r["amdsmi_get_gpu_accelerator_partition_profile"] = {
            "partition_id": [0],
            "partition_profile": {
                "profile_type": "N/A",
                "num_partitions": "N/A",
                "profile_index": "N/A",
                "memory_caps": "N/A",
                "num_resources": "N/A",
                "resources": "N/A",
            },
        }
    if i == 2:
        r[("amdsmi_get_clock_info", "GFX")] = _clk("N/A", 500, 2400)
    if i == 4:
        r["amdsmi_get_power_info"]["power_limit"] = "N/A"
    if i == 5:
        broken = _err(AMDSMI_STATUS_DRM_ERROR)
        r = {key: broken for key in r}
    if i == 6:
        r["amdsmi_get_gpu_vram_usage"] = {"vram_total": 294_896, "vram_used": UINT32_MAX}
    if i == 7:
        r["amdsmi_get_violation_status"] = _err(AMDSMI_STATUS_NOT_SUPPORTED)
    return r


NODES = {
    "mi300x": {"version": "6.2", "gpus": [_mi300x_gpu(i) for i in range(8)]},
    "mi355x": {"version": "7.0", "gpus": [_mi355x_gpu(i) for i in range(8)]},
}

# Enum values -> the names the canned responses are keyed by. GFX and SYS are
# both 0 in the real AmdSmiClkType, so the value, not the enum name, decides.
_KEY_NAMES = {
    "amdsmi_get_temp_metric": {0: "EDGE", 1: "HOTSPOT", 2: "VRAM"},
    "amdsmi_get_clock_info": {0: "GFX", 4: "MEM"},
}

# Functions the 6.2-era library does not have.
_ONLY_7X = ("amdsmi_get_gpu_accelerator_partition_profile", "amdsmi_get_violation_status")


def make_module(node: str = "mi355x") -> types.ModuleType:
    """A fresh fake ``amdsmi`` module for ``node`` ("mi300x" or "mi355x").

    The module also exposes ``calls`` (a list of (function, gpu index) pairs),
    ``init_count``/``shutdown_count`` and ``hang`` (a dict gpu index ->
    threading.Event; a call on that GPU blocks until the event is set).
    """
    spec = NODES[node]
    gpus: list[dict[Any, Any]] = spec["gpus"]
    mod = types.ModuleType(f"fake_amdsmi_{node}")
    mod.__doc__ = f"FAKE amdsmi ({node}, amdsmi {spec['version']} shapes)"
    mod.AmdSmiException = AmdSmiException
    mod.AmdSmiLibraryException = AmdSmiLibraryException
    mod.AmdSmiInitFlags = AmdSmiInitFlags
    mod.AmdSmiTemperatureType = AmdSmiTemperatureType
    mod.AmdSmiTemperatureMetric = AmdSmiTemperatureMetric
    mod.AmdSmiClkType = AmdSmiClkType
    mod.FAKE = True
    state: dict[str, Any] = {"init": False}
    mod.calls = []
    mod.init_count = 0
    mod.shutdown_count = 0
    mod.hang = {}
    handles = [FakeProcessorHandle(i) for i in range(len(gpus))]

    def amdsmi_init(flag: Any = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        if not isinstance(flag, AmdSmiInitFlags):
            raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL)
        state["init"] = True
        mod.init_count += 1

    def amdsmi_shut_down() -> None:
        state["init"] = False
        mod.shutdown_count += 1

    def amdsmi_get_processor_handles() -> list[FakeProcessorHandle]:
        if not state["init"]:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
        return list(handles)

    def responder(fn_name: str, keyed: bool) -> Any:
        def fn(handle: FakeProcessorHandle, *args: Any) -> Any:
            if not state["init"]:
                raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
            if not isinstance(handle, FakeProcessorHandle):
                raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL)
            mod.calls.append((fn_name, handle.index))
            gate = mod.hang.get(handle.index)
            if gate is not None:
                gate.wait()
            if keyed and not isinstance(args[0], IntEnum):
                raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL)
            key: Any = (fn_name, _KEY_NAMES[fn_name].get(int(args[0]), "?")) if keyed else fn_name
            if (
                keyed
                and fn_name == "amdsmi_get_temp_metric"
                and args[1] != AmdSmiTemperatureMetric.CURRENT
            ):
                raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
            answer = gpus[handle.index].get(key, _UNSUPPORTED)
            if answer is _UNSUPPORTED:  # made only when raised: a double's cost, not amdsmi's
                raise _err(AMDSMI_STATUS_NOT_SUPPORTED)
            if isinstance(answer, BaseException):
                raise answer
            return _copy(answer)

        fn.__name__ = fn_name
        return fn

    mod.amdsmi_init = amdsmi_init
    mod.amdsmi_shut_down = amdsmi_shut_down
    mod.amdsmi_get_processor_handles = amdsmi_get_processor_handles
    plain = {k for g in gpus for k in g if isinstance(k, str)}
    for fn_name in sorted(plain):
        if spec["version"].startswith("6") and fn_name in _ONLY_7X:
            continue
        setattr(mod, fn_name, responder(fn_name, keyed=False))
    mod.amdsmi_get_temp_metric = responder("amdsmi_get_temp_metric", keyed=True)
    mod.amdsmi_get_clock_info = responder("amdsmi_get_clock_info", keyed=True)
    return mod


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
