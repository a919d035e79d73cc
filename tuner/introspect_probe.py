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
import os
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


def _api_and_offline(table: dict[Any, int], usage: Any) -> tuple[int | None, int | None]:
    return table.get(usage.OPENAI_API_SERVER), table.get(usage.LLM_CLASS)


def probe_resolved_defaults() -> dict[str, Any]:
    """The defaults vLLM resolves here when a knob is unset, asked of vLLM itself.

    Batch knobs: ``EngineArgs.get_batch_defaults(world_size=1)`` (0.32
    engine/arg_utils.py ~2894; it reads the device's memory and name, and has a
    CPU branch). Cudagraph mode: the optimization level's default (0.32
    config/vllm.py OPTIMIZATION_LEVEL_TO_CONFIG, default O2), and NONE where the
    platform has no static graphs (config/vllm.py ~1874/~1940). Async scheduling
    and chunked prefill are ``None`` in EngineArgs, meaning vLLM decides at start
    (on unless the model or another feature rules it out): reported as "auto".
    """
    arg_utils = importlib.import_module("vllm.engine.arg_utils")
    usage = importlib.import_module("vllm.usage.usage_lib").UsageContext
    platform = importlib.import_module("vllm.platforms").current_platform
    mbt, seqs = arg_utils.EngineArgs.get_batch_defaults(1)
    out: dict[str, Any] = {}
    out["max_num_batched_tokens"], out["max_num_batched_tokens_offline"] = _api_and_offline(
        mbt, usage
    )
    out["max_num_seqs"], out["max_num_seqs_offline"] = _api_and_offline(seqs, usage)
    try:
        out["device_gib"] = round(platform.get_device_total_memory() / 1024**3, 1)
    except Exception:
        out["device_gib"] = None  # get_batch_defaults then reads 0 bytes too
    out["cudagraph_mode"] = _default_cudagraph_mode(platform)
    fields_ = {f.name: f.default for f in dataclasses.fields(arg_utils.EngineArgs)}
    for name in ("async_scheduling", "enable_chunked_prefill", "enable_prefix_caching"):
        value = fields_.get(name, dataclasses.MISSING)
        out[name] = "auto" if value is None else (None if value is dataclasses.MISSING else value)
    return out


def _default_cudagraph_mode(platform: Any) -> str | None:
    if not platform.support_static_graph_mode():
        return "NONE"
    config = importlib.import_module("vllm.config.vllm")
    table = getattr(config, "OPTIMIZATION_LEVEL_TO_CONFIG", None)
    level = getattr(config.VllmConfig, "optimization_level", None)
    if table is None or level is None:
        return None
    mode = table[level]["compilation_config"]["cudagraph_mode"]
    return str(getattr(mode, "name", mode))


def probe_backend_priorities() -> dict[str, Any]:
    """The attention backends this platform's own selector would try, best first.

    ROCm and CUDA: ``_get_backend_priorities`` of 0.32 platforms/rocm.py ~478
    and platforms/cuda.py ~83 (the AITER switches in the environment count,
    so the answer records the VLLM_ROCM_* variables it saw). Other platforms
    (CPU) have no list: the backend ``get_attn_backend_cls`` picks for a
    bf16, head-size-128, block-16 layer is the answer (0.32 platforms/cpu.py ~140).
    """
    platform = importlib.import_module("vllm.platforms").current_platform
    registry = _first_module(
        "vllm.v1.attention.backends.registry", "vllm.attention.backends.registry"
    )
    out: dict[str, Any] = {
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("VLLM_ROCM_")}
    }
    if platform.is_rocm():
        rocm = importlib.import_module("vllm.platforms.rocm")
        out["decoder"] = [b.name for b in rocm._get_backend_priorities(False, False)]
        out["mla"] = [b.name for b in rocm._get_backend_priorities(True, False)]
        return out
    if platform.is_cuda():
        cuda = importlib.import_module("vllm.platforms.cuda")
        cap = platform.get_device_capability()
        out["decoder"] = [b.name for b in cuda._get_backend_priorities(False, cap)]
        out["mla"] = [b.name for b in cuda._get_backend_priorities(True, cap)]
        return out
    selector = importlib.import_module("vllm.v1.attention.selector")
    torch = importlib.import_module("torch")
    by_path = {m.value: m.name for m in registry.AttentionBackendEnum if m.value}
    for key, mla in (("decoder", False), ("mla", True)):
        cfg = selector.AttentionSelectorConfig(
            head_size=128, dtype=torch.bfloat16, kv_cache_dtype="auto", block_size=16, use_mla=mla
        )
        path = platform.get_attn_backend_cls(None, cfg)
        out[key] = [by_path.get(path, path)]
    return out


PROBES: dict[str, Callable[[], Any]] = {
    "version": probe_version,
    "platform": probe_platform,
    "env_vars": probe_env_vars,
    "attention_backends": probe_attention_backends,
    "cudagraph_modes": probe_cudagraph_modes,
    "quantization_methods": probe_quantization_methods,
    "kv_cache_dtypes": probe_kv_cache_dtypes,
    "engine_args": probe_engine_args,
    "resolved_defaults": probe_resolved_defaults,
    "backend_priorities": probe_backend_priorities,
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
