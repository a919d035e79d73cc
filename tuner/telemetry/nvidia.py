"""NVIDIA telemetry through NVML (the ``pynvml`` module of ``nvidia-ml-py``).

NVML reports power in milliwatts, memory in bytes, clocks in MHz and
temperatures in °C. Any ``NVMLError`` (``NOT_SUPPORTED`` on a consumer
card, ``NO_PERMISSION``, ``GPU_IS_LOST``) sets that one metric to None; a
GPU whose core reads all fail is reported with ``error`` set. Importing
``pynvml`` is harmless; a missing ``libnvidia-ml.so.1`` shows at
``nvmlInit`` as ``NVMLError_LibraryNotFound``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tuner.telemetry import values as v
from tuner.telemetry.base import BackendUnavailable
from tuner.telemetry.quiet import silenced
from tuner.telemetry.types import GpuProcess, GpuSnapshot

# Clock-event (throttle) reason bits, from nvml.h; names as shown to the user.
_REASONS = (
    (0x0000000000000004, "power cap"),
    (0x0000000000000008, "hw slowdown"),
    (0x0000000000000010, "sync boost"),
    (0x0000000000000020, "thermal"),
    (0x0000000000000040, "hw thermal"),
    (0x0000000000000080, "power brake"),
    (0x0000000000000002, "app clocks"),
    (0x0000000000000001, "idle"),
)
_NVML_FI_DEV_MEMORY_TEMP = 82
_NVML_SUCCESS = 0
_MISSING = object()


def load_pynvml() -> ModuleType:
    """Import ``pynvml`` (silently, like amdsmi, in case a build prints).

    Raises:
        BackendUnavailable: When nvidia-ml-py is not installed.
    """
    try:
        with silenced():
            return importlib.import_module("pynvml")
    except ModuleNotFoundError as exc:
        raise BackendUnavailable(
            "NVML: Python package not installed (pip install nvidia-ml-py)"
        ) from exc
    except Exception as exc:
        raise BackendUnavailable(f"NVML: import failed: {type(exc).__name__}: {exc}") from exc


def _init_reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if name.endswith("LibraryNotFound"):
        return "NVML: libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
    if name.endswith("DriverNotLoaded"):
        return "NVML: NVIDIA driver not loaded"
    if name.endswith("NoPermission"):
        return "NVML: no permission to open the NVIDIA device"
    return f"NVML: init failed ({_describe(exc)})"


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if text.startswith("NVML") else f"{type(exc).__name__}: {text}"


def _as_text(raw: Any) -> str | None:
    return v.text(raw)


class NvmlBackend:
    """Telemetry from NVIDIA GPUs through NVML.

    Args:
        module: The pynvml module to use; None imports the real one.
    """

    name = "nvidia"

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
        return f"NVML: {n} NVIDIA GPU{'s' if n != 1 else ''}"

    def open(self) -> None:
        """Initialise NVML and take a handle per device.

        Raises:
            BackendUnavailable: Library missing, driver not loaded, or no GPU.
        """
        lib = self._lib if self._lib is not None else load_pynvml()
        self._lib = lib
        try:
            with silenced():
                lib.nvmlInit()
        except Exception as exc:
            raise BackendUnavailable(_init_reason(exc)) from exc
        self._opened = True
        try:
            n = int(lib.nvmlDeviceGetCount())
            handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except Exception as exc:
            self.close()
            raise BackendUnavailable(f"NVML: could not list GPUs ({_describe(exc)})") from exc
        if not handles:
            self.close()
            raise BackendUnavailable("NVML: no NVIDIA GPU found")
        self._handles = handles
        atexit.register(self.close)

    def count(self) -> int:
        return len(self._handles)

    def close(self) -> None:
        """Shut NVML down once; later calls do nothing."""
        with self._lock:
            if not self._opened:
                return
            self._opened = False
        atexit.unregister(self.close)
        # Shutting down a library whose driver is already gone is not worth an error.
        with contextlib.suppress(Exception):
            if self._lib is not None:  # set by open() before it marks NVML opened
                self._lib.nvmlShutdown()

    def snapshot(self, index: int) -> GpuSnapshot:
        """Read every metric of GPU ``index``; NVML errors become None."""
        lib = self._lib
        handle = self._handles[index]
        errors: list[BaseException] = []

        def call(fn_name: str, *args: Any) -> Any:
            fn: Callable[..., Any] | None = getattr(lib, fn_name, None)
            if fn is None:
                return _MISSING
            try:
                return fn(handle, *args)
            except Exception as exc:
                errors.append(exc)
                return _MISSING

        cached = self._names.get(index)
        if cached is None:
            raw_name = call("nvmlDeviceGetName")
            if raw_name is not _MISSING:
                cap = call("nvmlDeviceGetCudaComputeCapability")
                arch = f"sm_{cap[0]}{cap[1]}" if isinstance(cap, (tuple, list)) else None
                cached = (_as_text(raw_name), arch)
                self._names[index] = cached
        memory = call("nvmlDeviceGetMemoryInfo")
        util = call("nvmlDeviceGetUtilizationRates")
        power_mw = call("nvmlDeviceGetPowerUsage")
        core = [memory, util, power_mw] + ([] if cached is not None else [_MISSING])
        if all(r is _MISSING for r in core) and errors:
            name = cached[0] if cached else None
            return GpuSnapshot.failed(index, f"NVML: {_describe(errors[0])}", name=name)
        name, arch = cached if cached is not None else (None, None)

        def attr(obj: Any, field: str) -> Any:
            return None if obj is _MISSING else getattr(obj, field, None)

        cap_mw = call("nvmlDeviceGetEnforcedPowerLimit")
        temp_sensor = getattr(lib, "NVML_TEMPERATURE_GPU", 0)
        temp = call("nvmlDeviceGetTemperature", temp_sensor)

        clock_sm = getattr(lib, "NVML_CLOCK_SM", 1)
        clock_mem = getattr(lib, "NVML_CLOCK_MEM", 2)
        sm_clk = call("nvmlDeviceGetClockInfo", clock_sm)
        mem_clk = call("nvmlDeviceGetClockInfo", clock_mem)

        mig = call("nvmlDeviceGetMigMode")
        partition = None
        if isinstance(mig, (tuple, list)) and mig:
            partition = "MIG on" if mig[0] == 1 else "MIG off"

        return GpuSnapshot(
            index=index,
            name=name,
            arch=arch,
            gfx_activity=v.percent(attr(util, "gpu")),
            umc_activity=v.percent(attr(util, "memory")),
            vram_used=v.integer(attr(memory, "used")),
            vram_total=v.integer(attr(memory, "total")),
            power_w=_milli(power_mw),
            power_cap_w=_milli(cap_mw),
            temp_edge=v.celsius(None if temp is _MISSING else temp),
            temp_hotspot=None,  # NVML exposes no hotspot sensor on data-centre parts
            temp_mem=self._memory_temp(call),
            gfx_clock_mhz=v.number(None if sm_clk is _MISSING else sm_clk),
            mem_clock_mhz=v.number(None if mem_clk is _MISSING else mem_clk),
            compute_partition=partition,
            memory_partition=None,
            throttle=self._throttle(call),
            processes=self._processes(call),
        )

    @staticmethod
    def _memory_temp(call: Callable[..., Any]) -> float | None:
        values = call("nvmlDeviceGetFieldValues", [_NVML_FI_DEV_MEMORY_TEMP])
        if values is _MISSING or not values:
            return None
        field = values[0]
        if getattr(field, "nvmlReturn", 1) != _NVML_SUCCESS:
            return None
        value = getattr(field, "value", None)
        return v.celsius(getattr(value, "uiVal", None))

    @staticmethod
    def _throttle(call: Callable[..., Any]) -> str | None:
        mask = call("nvmlDeviceGetCurrentClocksEventReasons")
        if mask is _MISSING:
            mask = call("nvmlDeviceGetCurrentClocksThrottleReasons")
        if mask is _MISSING or not isinstance(mask, int):
            return None
        active = [word for bit, word in _REASONS if mask & bit]
        return ", ".join(active) if active else "none"

    def _processes(self, call: Callable[..., Any]) -> tuple[GpuProcess, ...] | None:
        listing = call("nvmlDeviceGetComputeRunningProcesses")
        if listing is _MISSING:
            return None
        procs: list[GpuProcess] = []
        name_of = getattr(self._lib, "nvmlSystemGetProcessName", None)
        for item in listing:
            pid = v.integer(getattr(item, "pid", None))
            if pid is None:
                continue
            name = None
            if name_of is not None:
                try:
                    name = _as_text(name_of(pid))
                except Exception:
                    name = None
            procs.append(
                GpuProcess(
                    pid=pid, name=name, vram_bytes=v.integer(getattr(item, "usedGpuMemory", None))
                )
            )
        return tuple(procs)


def _milli(raw: Any) -> float | None:
    """Milliwatts to watts; zero and sentinels are "not reported"."""
    if raw is _MISSING:
        return None
    num = v.number(raw)
    if num is None or num <= 0:
        return None
    return num / 1000.0
