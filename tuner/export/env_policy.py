"""Which environment variables a preset may carry, and which it never may.

A preset is a file people share and run. Its ``[env]`` table is exported by a
launch script before vLLM starts, so a variable such as ``LD_PRELOAD``,
``PYTHONPATH`` or ``BASH_ENV`` would let a preset run arbitrary code on the
machine that launches it. Only the families that tune vLLM and its libraries
are allowed (the reference docs set nothing else: 000_cadfc2653427814e.txt
§Performance environment variables, §AITER switches, §Multi-node checklist);
names inside those families that load a library or a plugin are refused too.
A user who really needs one passes an explicit override (``--allow-env NAME``).
Secrets (tokens, keys, passwords) are never written to any file tunelab writes:
they belong in the shell that runs the script, not in a preset.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Prefixes of the variable families that tune vLLM, ROCm, CUDA collectives,
# PyTorch and the Hugging Face loaders.
ALLOWED_PREFIXES: tuple[str, ...] = (
    "VLLM_",
    "ROCM_",
    "HIP_",
    "HSA_",
    "AITER_",
    "NCCL_",
    "RCCL_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "SAFETENSORS_",
    "OMP_",
    "MIOPEN_",
    "HIPBLASLT_",
    "TRITON_",
    "GPU_",
    "AMD_",
    "MKL_",
    "KMP_",
    "HF_",
    "TRANSFORMERS_",
    "TOKENIZERS_",
    "UCX_",
    "NVIDIA_",
)

# Single names outside those families that are harmless and commonly needed.
ALLOWED_NAMES: frozenset[str] = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_MODULE_LOADING",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "TOKENIZERS_PARALLELISM",
    }
)

# Names that make a process load or run code of the preset's choosing. They
# are refused even where their family is allowed.
CODE_RUNNING_NAMES: frozenset[str] = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "LD_BIND_NOW",
        "LD_DEBUG",
        "PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONUSERBASE",
        "PYTHONINSPECT",
        "PYTHONBREAKPOINT",
        "PYTHONWARNINGS",
        "PYTHONSAFEPATH",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
        "PS4",
        "CDPATH",
        "GLOBIGNORE",
        "HOME",
        "SHELL",
        "HSA_TOOLS_LIB",
        "OMP_TOOL_LIBRARIES",
        "OMP_TOOL",
        "CUDA_INJECTION64_PATH",
        "VLLM_LOGGING_CONFIG_PATH",
        "VLLM_PLUGINS",
        "TORCHINDUCTOR_CACHE_DIR",
        "TRITON_CACHE_DIR",
    }
)

# Shapes of library- or plugin-loading names inside the allowed families
# (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN, RCCL_..._LIB, ...).
_CODE_RUNNING_RE = re.compile(r"(PLUGIN|_LIB|_LIBS|_LIBRARY|_LIBRARIES|_PRELOAD|_INJECTION)")

# TOKEN only at the end: vLLM has tuning variables such as *_TOKENS and
# *_TOKEN_THRESHOLD that are not secrets.
_SECRET_RE = re.compile(r"(TOKEN$|_KEY$|^KEY$|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
_SECRET_NAMES: frozenset[str] = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"})


@dataclass(frozen=True)
class EnvVerdict:
    """Whether one variable may go into a preset, and why not.

    Attributes:
        allowed: True when the variable may be written and exported.
        secret: True when it is a secret (never written, whatever the override).
        reason: Why it is refused (empty when allowed).
        fix: What the user can do instead.
    """

    allowed: bool
    secret: bool = False
    reason: str = ""
    fix: str = ""


def is_secret(name: str) -> bool:
    """True for names that hold credentials (``HF_TOKEN``, ``*_KEY``, ``*PASSWORD*``...)."""
    return name in _SECRET_NAMES or bool(_SECRET_RE.search(name))


def is_code_running(name: str) -> bool:
    """True for names that make a process load or run code chosen by the value."""
    if name in CODE_RUNNING_NAMES or name.startswith("LD_") or name.startswith("PYTHON"):
        return True
    return bool(_CODE_RUNNING_RE.search(name))


def in_allowed_family(name: str) -> bool:
    """True when the name belongs to a family that tunes vLLM or its libraries."""
    return name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)


def check_env_name(name: str, allow: Iterable[str] = ()) -> EnvVerdict:
    """Decides whether ``name`` may appear in a preset's ``[env]``.

    Args:
        name: The variable name.
        allow: Names the user explicitly allowed (``--allow-env NAME``); they
            lift the family and code-running checks, never the secret check.

    Returns:
        The verdict, with a reason and a fix when refused.
    """
    if is_secret(name):
        return EnvVerdict(
            allowed=False,
            secret=True,
            reason=f"{name} looks like a secret; tunelab never writes secrets to a file",
            fix=f"remove {name} from the preset and export it in the shell that runs the launch script",
        )
    if name in set(allow):
        return EnvVerdict(allowed=True)
    if is_code_running(name):
        return EnvVerdict(
            allowed=False,
            reason=f"{name} can make the launched process run code chosen by the preset",
            fix=(
                f"remove {name}; if you trust this preset and really need it, pass "
                f"--allow-env {name}"
            ),
        )
    if not in_allowed_family(name):
        return EnvVerdict(
            allowed=False,
            reason=(
                f"{name} is not in an allowed family of variables "
                "(VLLM_, ROCM_, HIP_, HSA_, AITER_, NCCL_, RCCL_, TORCH_, PYTORCH_, "
                "SAFETENSORS_, OMP_, CUDA_VISIBLE_DEVICES, ...)"
            ),
            fix=f"remove {name}, or pass --allow-env {name} if you are sure it is harmless",
        )
    return EnvVerdict(allowed=True)


def split_secrets(env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Separates secrets from the rest: ``(env without secrets, secret names)``."""
    kept = {k: v for k, v in env.items() if not is_secret(k)}
    return kept, sorted(k for k in env if is_secret(k))
