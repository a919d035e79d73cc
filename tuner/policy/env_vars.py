"""Which environment variables a config may carry: an allowlist of names known to be plain data.

A config's ``[env]`` is exported before vLLM starts, by tunelab and by the launch script, so a
variable is code whenever something in the engine's process tree reads it as a library to load
(``LD_PRELOAD``), a module or file to import (``PYTHONPATH``, ``VLLM_PLUGINS``), a shell start-up
file (``BASH_ENV``) or compiler flags (``TORCHINDUCTOR_CPP_MARCH="native -wrapper ..."`` reached the
C++ compiler torch inductor runs while the engine compiles, and ran a shell command). Families
cannot be trusted by prefix, so a name is data only when tunelab knows what its value is:

- a knob of tunelab's catalogue (``tuner.knobs``: typed, range-checked);
- a variable vLLM's own ``vllm/envs.py`` reads as a bool, a number or one of fixed choices (the
  release's table, ``tuner.vllm_tables``; generated from vLLM's code, never restated);
- a variable of the libraries vLLM runs on (NCCL/RCCL, HSA/HIP, PyTorch, OpenMP, Hugging Face)
  listed in :data:`LIBRARY_VARIABLES` with the shape of its value.

Anything else is refused unless the user names it (``--allow-env NAME``). Secrets (tokens, keys,
passwords) are refused whatever the consent: they belong in the shell that runs the engine,
not in a config that tunelab stores and exports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import tuner.knobs as knobs
from tuner.config import ConfigError
from tuner.policy.consent import ALLOW_ENV_OPTION, Consent
from tuner.policy.violation import Violation
from tuner.switches import switch_state
from tuner.vllm_tables import is_data, table

_BOOL = {"kind": "bool"}
_INT = {"kind": "int"}


def _pattern(regex: str) -> dict[str, Any]:
    return {"kind": "pattern", "pattern": regex}


def _choice(*choices: str) -> dict[str, Any]:
    return {"kind": "choice", "choices": list(choices)}


_DEVICES = _pattern(r"[A-Za-z0-9,:\-]*")  # 0,1,2 / GPU-UUIDs / MIG ids
_NAMES = _pattern(r"[A-Za-z0-9_.,:;=^+\-]+")  # interface, HCA, subsystem and algorithm lists

# Variables of the libraries under vLLM whose values are plain data, with the shape of the
# value. Sources: 000_cadfc2653427814e.txt §Performance environment variables and §Multi-node
# checklist; 002_61ffe81b0393820b.txt §NUMA; NVIDIA NCCL, ROCm RCCL/HIP/HSA, PyTorch, OpenMP
# and Hugging Face documentation of each variable.
LIBRARY_VARIABLES: Mapping[str, dict[str, Any]] = {
    "CUDA_VISIBLE_DEVICES": _DEVICES,
    "HIP_VISIBLE_DEVICES": _DEVICES,
    "ROCR_VISIBLE_DEVICES": _DEVICES,
    "GPU_DEVICE_ORDINAL": _DEVICES,
    "CUDA_DEVICE_MAX_CONNECTIONS": _INT,
    "CUDA_LAUNCH_BLOCKING": _BOOL,
    "CUDA_MODULE_LOADING": _choice("LAZY", "EAGER"),
    "NVIDIA_TF32_OVERRIDE": _INT,
    "NCCL_MIN_NCHANNELS": _INT,
    "NCCL_MAX_NCHANNELS": _INT,
    "NCCL_NTHREADS": _INT,
    "NCCL_BUFFSIZE": _INT,
    "NCCL_DEBUG": _choice("VERSION", "WARN", "INFO", "TRACE"),
    "NCCL_DEBUG_SUBSYS": _NAMES,
    "NCCL_P2P_DISABLE": _BOOL,
    "NCCL_P2P_LEVEL": _NAMES,
    "NCCL_SHM_DISABLE": _BOOL,
    "NCCL_IB_DISABLE": _BOOL,
    "NCCL_IB_HCA": _NAMES,
    "NCCL_SOCKET_IFNAME": _NAMES,
    "NCCL_NET_GDR_LEVEL": _NAMES,
    "NCCL_CUMEM_ENABLE": _BOOL,
    "NCCL_NVLS_ENABLE": _BOOL,
    "NCCL_ALGO": _NAMES,
    "NCCL_PROTO": _NAMES,
    "RCCL_MSCCL_ENABLE": _BOOL,
    "RCCL_MSCCLPP_ENABLE": _BOOL,
    "HSA_NO_SCRATCH_RECLAIM": _BOOL,
    "HSA_FORCE_FINE_GRAIN_PCIE": _BOOL,
    "HSA_ENABLE_SDMA": _BOOL,
    "HSA_ENABLE_IPC_MODE_LEGACY": _BOOL,
    "HSA_OVERRIDE_GFX_VERSION": _pattern(r"\d+\.\d+\.\d+"),
    "HIP_FORCE_DEV_KERNARG": _BOOL,
    "GPU_MAX_HW_QUEUES": _INT,
    "AMD_SERIALIZE_KERNEL": _INT,
    "AMD_LOG_LEVEL": _INT,
    "HIPBLASLT_LOG_LEVEL": _INT,
    "MIOPEN_FIND_MODE": _NAMES,
    "MIOPEN_LOG_LEVEL": _INT,
    "AITER_LOG_MORE": _INT,
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": _INT,
    "TORCH_NCCL_HIGH_PRIORITY": _BOOL,
    "TORCH_NCCL_AVOID_RECORD_STREAMS": _BOOL,
    "TORCH_NCCL_BLOCKING_WAIT": _BOOL,
    "PYTORCH_TUNABLEOP_ENABLED": _BOOL,
    "PYTORCH_TUNABLEOP_TUNING": _BOOL,
    "PYTORCH_TUNABLEOP_VERBOSE": _INT,
    "PYTORCH_NO_CUDA_MEMORY_CACHING": _BOOL,
    "PYTORCH_CUDA_ALLOC_CONF": _pattern(r"[A-Za-z0-9_:.,]+"),
    "PYTORCH_HIP_ALLOC_CONF": _pattern(r"[A-Za-z0-9_:.,]+"),
    "OMP_NUM_THREADS": _INT,
    "MKL_NUM_THREADS": _INT,
    "OMP_PROC_BIND": _pattern(r"[A-Za-z,]+"),
    "OMP_PLACES": _pattern(r"[A-Za-z0-9_{}:,]+"),
    "KMP_AFFINITY": _pattern(r"[A-Za-z0-9=,\[\]\-]+"),
    "KMP_BLOCKTIME": _INT,
    "HF_HUB_OFFLINE": _BOOL,
    "HF_HUB_DISABLE_TELEMETRY": _BOOL,
    "HF_HUB_ENABLE_HF_TRANSFER": _BOOL,
    "HF_HUB_DISABLE_PROGRESS_BARS": _BOOL,
    "HF_DATASETS_OFFLINE": _BOOL,
    "TRANSFORMERS_OFFLINE": _BOOL,
    "TOKENIZERS_PARALLELISM": _BOOL,
    "UCX_TLS": _NAMES,
    "UCX_NET_DEVICES": _NAMES,
}

# Variables vLLM reads as text that are plain data (its table says "str"; this says what text).
VLLM_TEXT_VARIABLES: Mapping[str, dict[str, Any]] = {
    "VLLM_HOST_IP": _pattern(r"[0-9A-Fa-f.:]+"),
    "VLLM_LOOPBACK_IP": _pattern(r"[0-9A-Fa-f.:]+"),
    "VLLM_DP_MASTER_IP": _pattern(r"[0-9A-Fa-f.:]+"),
    "VLLM_LOGGING_LEVEL": _choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    "VLLM_TARGET_DEVICE": _choice("cuda", "rocm", "cpu", "tpu", "xpu"),
    "VLLM_PP_LAYER_PARTITION": _pattern(r"[0-9,]+"),
    "VLLM_CPU_OMP_THREADS_BIND": _pattern(r"[A-Za-z0-9,|\-]+"),
    "VLLM_DISABLED_KERNELS": _NAMES,
    "VLLM_VIDEO_LOADER_BACKEND": _NAMES,
    "VLLM_MOE_ROUTING_SIMULATION_STRATEGY": _NAMES,
    "VLLM_LOG_STATS_INTERVAL": {"kind": "float"},
}

# Switches vLLM reads as plain bools that still open a door no preset may open silently.
SECURITY_SWITCHES: Mapping[str, str] = {
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "it lets vLLM's processes unpickle messages (code)",
    "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "it lets API clients load adapters from paths at run time",
    "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "it lets media fetches follow redirects to other hosts",
}

# Why a family's unknown names are refused: said in the message, so the user sees the danger.
_FAMILY_REASONS: tuple[tuple[str, str], ...] = (
    ("LD_", "the dynamic loader reads it (libraries to load, audit modules)"),
    ("PYTHON", "the Python interpreter reads it (import paths, start-up files)"),
    ("TORCHINDUCTOR_", "torch inductor reads it, and some of its settings reach the C++ compiler"),
    ("TRITON_", "Triton reads it, and some of its settings reach its compiler and cache"),
    ("NCCL_", "NCCL reads it, and some of its settings load plugins"),
    ("RCCL_", "RCCL reads it, and some of its settings load plugins"),
    ("HSA_", "the ROCm runtime reads it, and some of its settings load tool libraries"),
    ("OMP_", "OpenMP reads it, and some of its settings load tool libraries"),
)
_COMPILER_NAMES = frozenset(
    {"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "NVCC_FLAGS", "HIPCC_FLAGS"}
)
_SHELL_NAMES = frozenset({"BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "IFS", "PS4", "PATH"})

# TOKEN only at the end: vLLM has tuning variables such as *_TOKENS and *_TOKEN_THRESHOLD
# that are not secrets.
_SECRET_RE = re.compile(r"(TOKEN$|_KEY$|^KEY$|_KEY_ID$|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
_SECRET_NAMES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"})


def is_secret(name: str) -> bool:
    """True for names that hold credentials (``HF_TOKEN``, ``*_KEY``, ``*PASSWORD*`` ...)."""
    return name in _SECRET_NAMES or bool(_SECRET_RE.search(name))


def split_secrets(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Separates secrets from the rest: ``(env without secrets, secret names)``."""
    kept = {k: v for k, v in env.items() if not is_secret(k)}
    return kept, sorted(k for k in env if is_secret(k))


def value_kind(name: str, vllm_version: str | None = None) -> dict[str, Any] | None:
    """What tunelab knows the value of ``name`` to be, or None when it is not known data.

    The catalogue's own type comes first (``{"kind": "catalogue"}``), then vLLM's table, then
    the library list.
    """
    knob = knobs.get(name)
    if knob is not None and knob.key == name:
        return {"kind": "catalogue"}
    kind = table(vllm_version).env.get(name)
    if kind is not None and is_data(kind):
        return dict(kind)
    return VLLM_TEXT_VARIABLES.get(name) or LIBRARY_VARIABLES.get(name)


def check(
    name: str, value: str, consent: Consent, vllm_version: str | None = None
) -> Violation | None:
    """The policy's verdict on ``name=value`` in a config's environment (None: allowed).

    Args:
        name: The variable.
        value: Its text, as exported.
        consent: What the user allowed; ``--allow-env NAME`` lifts all but the secret check.
        vllm_version: The release whose table says what vLLM reads (default: the shipped one).
    """
    if is_secret(name):
        return Violation(
            "env",
            name,
            f"{name} looks like a secret, and tunelab never stores or writes secrets",
            f"remove {name} and export it in the shell that starts tunelab or the launch script",
            "secret",
        )
    if name in consent.env:
        return None
    if name in SECURITY_SWITCHES and value.strip() and switch_state(value) is not False:
        return Violation(
            "env",
            name,
            f"{name} is a security switch: {SECURITY_SWITCHES[name]}",
            f"remove {name}; if you trust where this config comes from and need it, pass "
            f"{ALLOW_ENV_OPTION} {name}",
            "env",
        )
    kind = value_kind(name, vllm_version)
    if kind is None:
        return Violation(
            "env",
            name,
            f"{name} is not a variable tunelab knows to be plain data: {_why_unknown(name)}",
            f"remove {name}; if you trust where this config comes from and need it, pass "
            f"{ALLOW_ENV_OPTION} {name}",
            "env",
        )
    problem = _value_problem(name, value, kind)
    if problem:
        return Violation(
            "env",
            name,
            f"{name}={value[:60]!r} is not a value tunelab knows {name} to take ({problem})",
            f"give {name} a value of that shape, or pass {ALLOW_ENV_OPTION} {name} if you are "
            "sure of it",
            "env",
        )
    return None


def _why_unknown(name: str) -> str:
    if name in _COMPILER_NAMES or name.endswith("FLAGS"):
        return "compilers and linkers read it"
    if name in _SHELL_NAMES:
        return "the shell reads it (start-up files, command lookup)"
    if "PLUGIN" in name or name.endswith(("_LIB", "_LIBS", "_LIBRARY", "_PATH", "_DIR")):
        return "its value names a file, a library or a plugin to load"
    for prefix, reason in _FAMILY_REASONS:
        if name.startswith(prefix):
            return reason
    kind = table().env.get(name)
    if kind is not None:
        return f"vLLM reads it as {kind.get('kind', 'text')}, which can name files or code"
    return "neither tunelab's catalogue nor vLLM's own variables list it"


def _value_problem(name: str, value: str, kind: Mapping[str, Any]) -> str:
    """Why ``value`` does not fit ``kind`` (empty when it fits)."""
    text = value.strip()
    match kind.get("kind"):
        case "catalogue":
            try:
                knobs.coerce(name, value)
            except ConfigError as exc:
                return str(exc)
            shape = LIBRARY_VARIABLES.get(name)  # a free-text knob whose value has a shape
            return _value_problem(name, value, shape) if shape else ""
        case "bool":
            return "" if switch_state(text) is not None else "a switch: 1 or 0"
        case "int":
            return "" if re.fullmatch(r"-?\d{1,19}", text) else "a whole number"
        case "float":
            return (
                "" if re.fullmatch(r"-?\d{1,19}(\.\d{1,19})?([eE]-?\d{1,3})?", text) else "a number"
            )
        case "choice":
            choices = [str(c) for c in kind.get("choices", ())]
            if text in choices or text.lower() in (c.lower() for c in choices):
                return ""
            return "one of " + ", ".join(choices[:12])
        case "list":
            parts = [p for p in re.split(r"[,\s]+", text) if p]
            bad = [p for p in parts if _value_problem(name, p, kind["items"])]
            return f"a list of {kind['items'].get('kind')}" if bad else ""
        case "pattern":
            ok = re.fullmatch(str(kind["pattern"]), value) is not None and len(value) <= 512
            return "" if ok else "names, numbers and separators only"
    return "an unknown kind of value"
