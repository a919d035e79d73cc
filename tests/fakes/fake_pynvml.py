"""FAKE ``pynvml`` module (nvidia-ml-py) for an 8-GPU H100 node.

Same function and constant names as the real ``pynvml``; answers in its
shapes: ``nvmlDeviceGetName`` returns str (nvidia-ml-py >= 11.5 decodes),
memory info and utilisation are structs with attributes, power in mW,
``nvmlDeviceGetFieldValues`` returns field structs with ``nvmlReturn`` and a
``value`` union, running processes carry ``usedGpuMemory`` (None when
NVML_VALUE_NOT_AVAILABLE), errors are ``NVMLError`` subclasses chosen by
code, like the real module's ``NVMLError.__new__``.

Node layout (values typical of an H100 SXM node, not a capture):
GPUs 0-3 run an engine, GPU 1 is under MIG (utilisation NOT_SUPPORTED),
GPU 2 refuses the process list (NO_PERMISSION), GPU 3 is power-capped and
its memory-temperature field fails, GPU 7 has fallen off the bus
(GPU_IS_LOST on every call).
"""

from __future__ import annotations

import types
from types import SimpleNamespace
from typing import Any, ClassVar

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_FI_DEV_MEMORY_TEMP = 82
NVML_VALUE_TYPE_UNSIGNED_INT = 1
nvmlClocksEventReasonGpuIdle = 0x1
nvmlClocksEventReasonSwPowerCap = 0x4

_MESSAGES = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
}


class NVMLError(Exception):
    """Picks the subclass for the code, as the real NVMLError does."""

    _valClassMapping: ClassVar[dict[int, type]] = {}

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __init__(self, value: int) -> None:
        super().__init__(value)

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_NoPermission(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


NVMLError._valClassMapping.update(
    {
        NVML_ERROR_NOT_SUPPORTED: NVMLError_NotSupported,
        NVML_ERROR_NO_PERMISSION: NVMLError_NoPermission,
        NVML_ERROR_LIBRARY_NOT_FOUND: NVMLError_LibraryNotFound,
        NVML_ERROR_GPU_IS_LOST: NVMLError_GpuIsLost,
    }
)

GIB = 1024**3


def _gpu(i: int) -> dict[str, Any]:
    busy = i < 4
    mem_used = 76 * GIB if busy else 1 * GIB // 2
    r: dict[str, Any] = {
        "nvmlDeviceGetName": "NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetCudaComputeCapability": (9, 0),
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(
            total=80 * GIB, used=mem_used, free=80 * GIB - mem_used
        ),
        "nvmlDeviceGetUtilizationRates": SimpleNamespace(
            gpu=99 if busy else 0, memory=47 if busy else 0
        ),
        "nvmlDeviceGetPowerUsage": 652_431 if busy else 71_204,
        "nvmlDeviceGetEnforcedPowerLimit": 700_000,
        "nvmlDeviceGetTemperature": 63 if busy else 31,
        "nvmlDeviceGetFieldValues": [
            SimpleNamespace(
                fieldId=NVML_FI_DEV_MEMORY_TEMP,
                nvmlReturn=NVML_SUCCESS,
                valueType=NVML_VALUE_TYPE_UNSIGNED_INT,
                value=SimpleNamespace(uiVal=71 if busy else 35),
            )
        ],
        ("nvmlDeviceGetClockInfo", NVML_CLOCK_SM): 1980 if busy else 345,
        ("nvmlDeviceGetClockInfo", NVML_CLOCK_MEM): 2619,
        "nvmlDeviceGetMigMode": [0, 0],
        "nvmlDeviceGetCurrentClocksEventReasons": 0 if busy else nvmlClocksEventReasonGpuIdle,
        "nvmlDeviceGetComputeRunningProcesses": [
            SimpleNamespace(
                pid=7000 + i,
                usedGpuMemory=75 * GIB,
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
        ]
        if busy
        else [],
    }
    if i == 1:
        r["nvmlDeviceGetMigMode"] = [1, 1]
        r["nvmlDeviceGetUtilizationRates"] = NVMLError(NVML_ERROR_NOT_SUPPORTED)
        r["nvmlDeviceGetComputeRunningProcesses"] = [
            SimpleNamespace(pid=7101, usedGpuMemory=None, gpuInstanceId=1, computeInstanceId=0)
        ]
    if i == 2:
        r["nvmlDeviceGetComputeRunningProcesses"] = NVMLError(NVML_ERROR_NO_PERMISSION)
    if i == 3:
        r["nvmlDeviceGetCurrentClocksEventReasons"] = nvmlClocksEventReasonSwPowerCap
        r["nvmlDeviceGetFieldValues"] = [
            SimpleNamespace(
                fieldId=NVML_FI_DEV_MEMORY_TEMP,
                nvmlReturn=NVML_ERROR_NOT_SUPPORTED,
                valueType=NVML_VALUE_TYPE_UNSIGNED_INT,
                value=SimpleNamespace(uiVal=0),
            )
        ]
    if i == 7:
        r = {key: NVMLError(NVML_ERROR_GPU_IS_LOST) for key in r}
    return r


GPUS = [_gpu(i) for i in range(8)]
PROCESS_NAMES = {7000: "python3", 7101: "vllm", 7003: "python3"}


def make_module() -> types.ModuleType:
    """A fresh fake ``pynvml`` module; ``init_count``/``shutdown_count`` record lifecycle."""
    mod = types.ModuleType("fake_pynvml")
    mod.__doc__ = "FAKE pynvml (8x H100 SXM)"
    mod.FAKE = True
    for name, value in globals().items():
        if name.startswith(("NVML_", "NVMLError", "nvmlClocksEventReason")):
            setattr(mod, name, value)
    state = {"init": False}
    mod.init_count = 0
    mod.shutdown_count = 0
    mod.calls = []

    def check() -> None:
        if not state["init"]:
            raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED

    def nvmlInit() -> None:
        state["init"] = True
        mod.init_count += 1

    def nvmlShutdown() -> None:
        check()
        state["init"] = False
        mod.shutdown_count += 1

    def nvmlDeviceGetCount() -> int:
        check()
        return len(GPUS)

    def nvmlDeviceGetHandleByIndex(index: int) -> SimpleNamespace:
        check()
        return SimpleNamespace(index=index)

    def nvmlSystemGetProcessName(pid: int) -> str:
        check()
        if pid not in PROCESS_NAMES:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return PROCESS_NAMES[pid]

    def responder(fn_name: str) -> Any:
        def fn(handle: SimpleNamespace, *args: Any) -> Any:
            check()
            mod.calls.append((fn_name, handle.index))
            gpu = GPUS[handle.index]
            key: Any = fn_name
            if fn_name == "nvmlDeviceGetClockInfo":
                key = (fn_name, args[0])
            if fn_name == "nvmlDeviceGetTemperature" and args[0] != NVML_TEMPERATURE_GPU:
                raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
            answer = gpu.get(key, NVMLError(NVML_ERROR_NOT_SUPPORTED))
            if isinstance(answer, BaseException):
                raise answer
            return answer

        fn.__name__ = fn_name
        return fn

    mod.nvmlInit = nvmlInit
    mod.nvmlShutdown = nvmlShutdown
    mod.nvmlDeviceGetCount = nvmlDeviceGetCount
    mod.nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByIndex
    mod.nvmlSystemGetProcessName = nvmlSystemGetProcessName
    names = {k if isinstance(k, str) else k[0] for g in GPUS for k in g}
    for fn_name in sorted(names):
        setattr(mod, fn_name, responder(fn_name))
    return mod
