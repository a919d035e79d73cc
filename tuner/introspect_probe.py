"""The introspection probe: runs inside the target interpreter and prints what its vLLM accepts.

``tuner.introspect`` runs this file's source with ``python -c`` in a
subprocess of the interpreter that will run the engine, so the tunelab
process never imports vLLM or torch. It uses only the standard library and
vLLM, imports vLLM modules through ``importlib`` (the import-linter contract
forbids static vLLM imports under ``tuner``), and probes each field on its
own: a field that fails is reported in ``field_errors`` and the rest still
arrive. The answer is one JSON line after ``MARKER`` on stdout, because vLLM
may print logs there too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib
import json
import sys
import time
import typing
from collections.abc import Callable
from typing import Any

MARKER = "@@TUNELAB_PROBE@@"


def _first_module(*names: str) -> Any:
    """The first of ``names`` that imports; re-raises the last error if none does."""
    error: Exception | None = None
    for name in names:
        try:
            return importlib.import_module(name)
        except Exception as exc:
            error = exc
    assert error is not None
    raise error


def _enum_names(obj: Any) -> list[str]:
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return [member.name for member in obj]
    raise TypeError(f"{obj!r} is not an enum")


def probe_version() -> str:
    vllm = importlib.import_module("vllm")
    return str(vllm.__version__)


def probe_platform() -> dict[str, Any]:
    platforms = importlib.import_module("vllm.platforms")
    current = platforms.current_platform
    out: dict[str, Any] = {"platform": None, "device_name": None, "gpu_arch": None}
    if current.is_rocm():
        out["platform"] = "rocm"
    elif current.is_cuda():
        out["platform"] = "cuda"
    elif current.is_cpu():
        out["platform"] = "cpu"
    else:
        out["platform"] = str(getattr(current, "device_type", "") or "unknown")
    if out["platform"] in ("rocm", "cuda"):
        with contextlib.suppress(Exception):
            out["device_name"] = str(current.get_device_name(0))
        torch = importlib.import_module("torch")
        props = torch.cuda.get_device_properties(0)
        arch = getattr(props, "gcnArchName", None)
        if arch:
            out["gpu_arch"] = str(arch).split(":")[0]  # "gfx942:sramecc+:xnack-" -> gfx942
        else:
            out["gpu_arch"] = f"sm_{props.major}{props.minor}"
    return out


def probe_env_vars() -> list[str]:
    envs = importlib.import_module("vllm.envs")
    table = getattr(envs, "environment_variables", None)
    if isinstance(table, dict):
        return sorted(table)
    return sorted(name for name in dir(envs) if name.isupper())


def probe_attention_backends() -> list[str]:
    for module, attr in (
        ("vllm.v1.attention.backends.registry", "AttentionBackendEnum"),
        ("vllm.attention.backends.registry", "AttentionBackendEnum"),
        ("vllm.attention.backends.registry", "_Backend"),
        ("vllm.platforms.interface", "_Backend"),
    ):
        try:
            return _enum_names(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            continue
    raise LookupError("no attention backend registry found in this vLLM")


def probe_cudagraph_modes() -> list[str]:
    mod = _first_module("vllm.config.compilation", "vllm.config")
    return _enum_names(mod.CUDAGraphMode)


def probe_quantization_methods() -> list[str]:
    mod = importlib.import_module("vllm.model_executor.layers.quantization")
    return [str(m) for m in mod.QUANTIZATION_METHODS]


def probe_kv_cache_dtypes() -> list[str]:
    mod = _first_module("vllm.config.cache", "vllm.config")
    return [str(v) for v in typing.get_args(mod.CacheDType)]


def probe_engine_args() -> list[str]:
    mod = importlib.import_module("vllm.engine.arg_utils")
    fields = dataclasses.fields(mod.EngineArgs)
    return sorted(f.name.replace("_", "-") for f in fields if not f.name.startswith("_"))


PROBES: dict[str, Callable[[], Any]] = {
    "version": probe_version,
    "platform": probe_platform,
    "env_vars": probe_env_vars,
    "attention_backends": probe_attention_backends,
    "cudagraph_modes": probe_cudagraph_modes,
    "quantization_methods": probe_quantization_methods,
    "kv_cache_dtypes": probe_kv_cache_dtypes,
    "engine_args": probe_engine_args,
}


def main() -> None:
    """Runs every probe and prints the JSON answer after the marker."""
    answer: dict[str, Any] = {"field_errors": {}}
    started = time.monotonic()
    for name, func in PROBES.items():
        try:
            value = func()
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            answer["field_errors"][name] = f"{type(exc).__name__}: {exc}"[:500]
            if name == "version":
                break  # vLLM itself does not import: nothing else can work
            continue
        if name == "platform":
            answer.update(value)
        else:
            answer[name] = value
    answer["probe_seconds"] = round(time.monotonic() - started, 3)
    sys.stdout.flush()
    print(MARKER + json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
