"""AMD Instinct telemetry through the real ``amdsmi`` Python package.

Written against the amdsmi Python API as shipped with ROCm 6.x and 7.x
(``amdsmi_interface.py``). The traps it handles:

* ``import amdsmi`` without ``libamd_smi.so`` prints to stdout and raises
  ``KeyError`` — the import runs silenced and any exception becomes a reason.
* "N/A" strings and all-ones sentinels (0xFFFF, 0xFFFFFFFF) mean "absent".
* Power fields moved: 7.x has ``socket_power``; MI300 on 6.x reports
  ``current_socket_power``; older parts ``average_socket_power``. Power caps
  from ``amdsmi_get_power_cap_info`` are µW, and newer libraries report
  ``power_limit`` in µW too.
* ``amdsmi_get_gpu_compute_partition`` is deprecated in favour of the
  accelerator partition profile; both are tried.
* ``amdsmi_get_gpu_vram_usage`` is in MB (MiB); process memory is in bytes.

Every metric is read on its own; a call that raises leaves that metric None
and, where a second source exists (``amdsmi_get_gpu_metrics_info``), the
second source fills it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from tuner.telemetry import values as v
from tuner.telemetry.base import BackendUnavailable
from tuner.telemetry.quiet import silenced
from tuner.telemetry.types import GpuProcess, GpuSnapshot

MIB = 1024 * 1024

# Violation-status flags (amdsmi >= 6.4) and the words shown for them.
_VIOLATIONS = (
    ("active_ppt_pwr", "power"),
    ("active_socket_thrm", "thermal"),
    ("active_prochot_thrm", "prochot"),
    ("active_vr_thrm", "VR thermal"),
    ("active_hbm_thrm", "HBM thermal"),
)

_MISSING = object()


def load_amdsmi() -> ModuleType:
    """Import ``amdsmi`` without letting it print; explain any failure.

    Returns:
        The imported module.

    Raises:
        BackendUnavailable: With a one-line reason ("amdsmi: libamd_smi.so
            not found ...", "amdsmi: Python package not installed ...").
    """
    printed = ""
    try:
        with silenced() as out:
            try:
                return importlib.import_module("amdsmi")
            finally:
                printed = out.getvalue()
    except ModuleNotFoundError as exc:
        if exc.name == "amdsmi":
            raise BackendUnavailable(
                "amdsmi: Python package not installed (pip install amdsmi)"
            ) from exc
        raise BackendUnavailable(f"amdsmi: import failed: {exc}") from exc
    except Exception as exc:  # KeyError('libamd_smi.so') is what a missing library gives
        if "libamd_smi" in printed or "libamd_smi" in str(exc):
            raise BackendUnavailable(
                "amdsmi: libamd_smi.so not found (install ROCm's amd-smi-lib, or set ROCM_PATH)"
            ) from exc
        raise BackendUnavailable(f"amdsmi: import failed: {type(exc).__name__}: {exc}") from exc


def describe_error(exc: BaseException) -> str:
    """Short text for an amdsmi exception ("AMDSMI_STATUS_NOT_SUPPORTED")."""
    info = getattr(exc, "get_error_info", None)
    if callable(info):
        try:
            return str(info(detailed=False))
        except Exception:
            pass
    return f"{type(exc).__name__}: {exc}".strip().rstrip(":")


def _arch(raw: Any) -> str | None:
    if isinstance(raw, int) and raw not in v.SENTINELS and raw > 0:
        return f"gfx{raw:x}"
    name = v.text(raw)
    if name is None or name in ("gfx0", "gfxffff", "gfxffffffff"):
        return None
    return name if name.startswith("gfx") else f"gfx{name}"


class AmdSmiBackend:
    """Telemetry from AMD GPUs through amdsmi.

    Args:
        module: The amdsmi module to use; None imports the real one (silently).
            Tests pass a recorded-response fake here.
    """

    name = "amd"

    def __init__(self, module: ModuleType | None = None) -> None:
        self._lib = module
        self._handles: list[Any] = []
        self._names: dict[int, tuple[str | None, str | None]] = {}
        self._lock = threading.Lock()
        self._opened = False

    @property
    def reasons(self) -> tuple[str, ...]:
        return ()

    @property
    def description(self) -> str:
        n = len(self._handles)
        return f"amdsmi: {n} AMD GPU{'s' if n != 1 else ''}"

    def open(self) -> None:
        """Initialise amdsmi for GPUs and list the devices.

        Raises:
            BackendUnavailable: Library missing, init failed, or no AMD GPU.
        """
        lib = self._lib if self._lib is not None else load_amdsmi()
        self._lib = lib
        try:
            with silenced():  # the C library may warn on stderr when the driver is absent
                lib.amdsmi_init(lib.AmdSmiInitFlags.INIT_AMD_GPUS)
        except Exception as exc:
            raise BackendUnavailable(f"amdsmi: init failed ({describe_error(exc)})") from exc
        self._opened = True
        try:
            handles = list(lib.amdsmi_get_processor_handles())
        except Exception as exc:
            self.close()
            raise BackendUnavailable(
                f"amdsmi: could not list GPUs ({describe_error(exc)})"
            ) from exc
        if not handles:
            self.close()
            raise BackendUnavailable("amdsmi: no AMD GPU found (is the amdgpu driver loaded?)")
        self._handles = handles
        atexit.register(self.close)

    def count(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        """Shut amdsmi down once; later calls do nothing."""
        with self._lock:
            if not self._opened:
                return
            self._opened = False
        atexit.unregister(self.close)
        # Shutting down a library whose driver is already gone is not worth an error.
        with contextlib.suppress(Exception):
            if self._lib is not None:  # set by open() before it marks amdsmi opened
                self._lib.amdsmi_shut_down()

    def snapshot(self, index: int) -> GpuSnapshot:
        """Read every metric of GPU ``index``; failures become None, never raise."""
        call = _Calls(self._lib, self._handles[index])
        # Core reads: if all of them fail the GPU is unreadable as a whole.
        cached = self._cached_names(index, call)
        vram = call("amdsmi_get_gpu_vram_usage")
        activity = call("amdsmi_get_gpu_activity")
        power = call("amdsmi_get_power_info")
        core = [vram, activity, power] if cached is not None else [None, vram, activity, power]
        if all(not isinstance(r, dict) for r in core) and call.errors:
            name = cached[0] if cached else None
            return GpuSnapshot.failed(index, f"amdsmi: {describe_error(call.errors[0])}", name=name)
        name, arch = cached if cached is not None else (None, None)
        return self._full_snapshot(
            index, name, arch, call, _dict_of(vram), _dict_of(activity), _dict_of(power)
        )

    def _cached_names(self, index: int, call: _Calls) -> tuple[str | None, str | None] | None:
        """(market name, gfx arch) of GPU ``index``, read once and kept (they never change).

        None when the ASIC info could not be read; it is tried again next time.
        """
        cached = self._names.get(index)
        if cached is None:
            asic = call("amdsmi_get_gpu_asic_info")
            if isinstance(asic, dict):
                cached = (
                    v.text(asic.get("market_name")),
                    _arch(asic.get("target_graphics_version")),
                )
                self._names[index] = cached
        return cached

    def _full_snapshot(
        self,
        index: int,
        name: str | None,
        arch: str | None,
        call: _Calls,
        vram: dict[str, Any],
        activity: dict[str, Any],
        power: dict[str, Any],
    ) -> GpuSnapshot:
        """The snapshot of a readable GPU: each metric from its first source that answers."""
        metrics = _dict_of(call("amdsmi_get_gpu_metrics_info"))
        gfx, umc = _activities(activity, metrics)
        used_mib = v.integer(vram.get("vram_used"))
        total_mib = v.integer(vram.get("vram_total"))
        power_w, cap_w = _power(call, power, metrics)
        temp_edge, temp_hot, temp_mem = self._temperatures(call, metrics)
        gfx_clk, mem_clk = self._clocks(call, metrics)
        compute_partition, memory_partition = _partitions(call)
        return GpuSnapshot(
            index=index,
            name=name,
            arch=arch,
            gfx_activity=gfx,
            umc_activity=umc,
            vram_used=None if used_mib is None else used_mib * MIB,
            vram_total=None if total_mib is None else total_mib * MIB,
            power_w=power_w,
            power_cap_w=cap_w,
            temp_edge=temp_edge,
            temp_hotspot=temp_hot,
            temp_mem=temp_mem,
            gfx_clock_mhz=gfx_clk,
            mem_clock_mhz=mem_clk,
            compute_partition=compute_partition,
            memory_partition=memory_partition,
            throttle=self._throttle(call, metrics),
            processes=self._processes(call, call.handle),
        )

    def _temperatures(
        self, call: Callable[..., Any], metrics: dict[str, Any]
    ) -> tuple[float | None, float | None, float | None]:
        lib = self._lib
        kinds = getattr(lib, "AmdSmiTemperatureType", None)
        current = getattr(getattr(lib, "AmdSmiTemperatureMetric", None), "CURRENT", None)

        def read(sensor: str) -> float | None:
            if kinds is None or current is None or not hasattr(kinds, sensor):
                return None
            raw = call("amdsmi_get_temp_metric", getattr(kinds, sensor), current)
            return v.celsius(raw) if raw is not _MISSING else None

        edge = read("EDGE")
        if edge is None:
            edge = v.celsius(metrics.get("temperature_edge"))
        hot = read("HOTSPOT")
        if hot is None:
            hot = v.celsius(metrics.get("temperature_hotspot"))
        mem = read("VRAM")
        if mem is None:
            mem = v.celsius(metrics.get("temperature_mem"))
        if mem is None:
            hbm = metrics.get("temperature_hbm")
            readings = (
                [t for t in map(v.celsius, hbm) if t is not None] if isinstance(hbm, list) else []
            )
            mem = max(readings) if readings else None
        return edge, hot, mem

    def _clocks(
        self, call: Callable[..., Any], metrics: dict[str, Any]
    ) -> tuple[float | None, float | None]:
        kinds = getattr(self._lib, "AmdSmiClkType", None)

        def read(kind: str) -> float | None:
            if kinds is None or not hasattr(kinds, kind):
                return None
            info = call("amdsmi_get_clock_info", getattr(kinds, kind))
            return v.number(info.get("clk")) if isinstance(info, dict) else None

        gfx = read("GFX")
        if gfx is None:
            gfx = _first(
                v.number, metrics.get("current_gfxclk"), metrics.get("average_gfxclk_frequency")
            )
        mem = read("MEM")
        if mem is None:
            mem = _first(
                v.number, metrics.get("current_uclk"), metrics.get("average_uclk_frequency")
            )
        return gfx, mem

    @staticmethod
    def _throttle(call: Callable[..., Any], metrics: dict[str, Any]) -> str | None:
        status = call("amdsmi_get_violation_status")
        if isinstance(status, dict):
            flags = [(word, status.get(key)) for key, word in _VIOLATIONS]
            known = [(word, flag) for word, flag in flags if isinstance(flag, bool)]
            if known:
                active = [word for word, flag in known if flag]
                return ", ".join(active) if active else "none"
        for key in ("indep_throttle_status", "throttle_status"):
            flag = metrics.get(key)
            if isinstance(flag, bool):
                return "throttled" if flag else "none"
        return None

    def _processes(self, call: Callable[..., Any], handle: Any) -> tuple[GpuProcess, ...] | None:
        listing = call("amdsmi_get_gpu_process_list")
        if not isinstance(listing, list):
            return None  # not readable (often: no permission to see other users' processes)
        procs: list[GpuProcess] = []
        for item in listing:
            info = item
            if not isinstance(info, dict):  # amdsmi 6.0 returned handles to look up
                fn = getattr(self._lib, "amdsmi_get_gpu_process_info", None)
                try:
                    info = fn(handle, item) if fn is not None else None
                except Exception:
                    info = None
                if not isinstance(info, dict):
                    continue
            pid = v.integer(info.get("pid"))
            if pid is None:
                continue
            usage = info.get("memory_usage")
            vram = v.integer(usage.get("vram_mem")) if isinstance(usage, dict) else None
            if vram is None:
                vram = v.integer(info.get("mem"))
            procs.append(GpuProcess(pid=pid, name=v.text(info.get("name")), vram_bytes=vram))
        return tuple(procs)


def _first(convert: Callable[[Any], float | None], *candidates: Any) -> float | None:
    for raw in candidates:
        value = convert(raw)
        if value is not None:
            return value
    return None


@dataclass
class _Calls:
    """amdsmi calls on one GPU handle, each on its own (one failed read spoils no other).

    Calling it returns the function's result, ``None`` when the call raised
    (the exception is kept in ``errors``), or ``_MISSING`` when this amdsmi
    has no such function.

    Attributes:
        lib: The amdsmi module.
        handle: The GPU's processor handle, passed first to every call.
        errors: Every exception raised so far, in order.
    """

    lib: Any
    handle: Any
    errors: list[BaseException] = field(default_factory=list)

    def __call__(self, fn_name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(self.lib, fn_name, None)
        if fn is None:
            return _MISSING
        try:
            return fn(self.handle, *args)
        except Exception as exc:
            self.errors.append(exc)
            return None


def _dict_of(result: Any) -> dict[str, Any]:
    """The result when amdsmi answered with a dict; else empty (every key then reads None)."""
    return result if isinstance(result, dict) else {}


def _activities(
    activity: dict[str, Any], metrics: dict[str, Any]
) -> tuple[float | None, float | None]:
    """(GFX, UMC) busy percent: the activity call first, the metrics table's averages second."""
    gfx = v.percent(activity.get("gfx_activity"))
    if gfx is None:
        gfx = v.percent(metrics.get("average_gfx_activity"))
    umc = v.percent(activity.get("umc_activity"))
    if umc is None:
        umc = v.percent(metrics.get("average_umc_activity"))
    return gfx, umc


def _power(
    call: _Calls, power: dict[str, Any], metrics: dict[str, Any]
) -> tuple[float | None, float | None]:
    """(socket power, power cap) in W, from whichever field this amdsmi version fills."""
    power_w = _first(
        v.watts,
        power.get("socket_power"),  # amdsmi 7.x
        power.get("current_socket_power"),  # MI300 on 6.x
        power.get("average_socket_power"),  # MI200 and older
        metrics.get("current_socket_power"),
        metrics.get("average_socket_power"),
    )
    cap_w = v.watts(power.get("power_limit"))
    if cap_w is None:
        cap_w = v.watts(_dict_of(call("amdsmi_get_power_cap_info")).get("power_cap"))
    return power_w, cap_w


def _partitions(call: _Calls) -> tuple[str | None, str | None]:
    """(compute partition, memory partition), each None when not readable.

    The compute partition comes from the accelerator partition profile first and
    from the deprecated ``amdsmi_get_gpu_compute_partition`` second.
    """
    compute_partition = None
    profile = _dict_of(call("amdsmi_get_gpu_accelerator_partition_profile"))
    if profile:
        compute_partition = v.text(_dict_of(profile.get("partition_profile")).get("profile_type"))
    if compute_partition is None:
        raw = call("amdsmi_get_gpu_compute_partition")
        compute_partition = v.text(raw) if raw is not _MISSING else None
    raw_mem = call("amdsmi_get_gpu_memory_partition")
    memory_partition = v.text(raw_mem) if raw_mem is not _MISSING else None
    return compute_partition, memory_partition
