"""A ``docker run`` script for the ROCm vLLM image (or the CUDA one for CUDA targets).

The device and group options are those of the reference docs for vLLM on
Instinct GPUs: ``--device /dev/kfd --device /dev/dri --group-add video
--ipc=host --cap-add=SYS_PTRACE --security-opt seccomp=unconfined`` and the
host network (004_c4561cd56ddb4be5.txt §2. Launching the Container; the same
set in 002_61ffe81b0393820b.txt §Quick Start Guide), plus a large
``--shm-size`` because RCCL uses shared memory for rendezvous
(000_cadfc2653427814e.txt §Multi-node checklist and troubleshooting). The
environment goes in as ``-e NAME=VALUE`` items, single-quoted; the command
inside the container is the same argv as the launch script. Secrets are
passed by name only (``-e HF_TOKEN``), so docker copies them from the
caller's environment and they are never written into the file.
"""

from __future__ import annotations

from tuner.config import EngineConfig
from tuner.export.env_policy import split_secrets
from tuner.export.quoting import comment_text, shell_quote
from tuner.export.script import SHELLCHECK_DIRECTIVE

ROCM_IMAGE = "rocm/vllm:latest"
CUDA_IMAGE = "vllm/vllm-openai:latest"

# 004_c4561cd56ddb4be5.txt §2. Launching the Container.
ROCM_OPTIONS = (
    "--network=host",
    "--device=/dev/kfd",
    "--device=/dev/dri",
    "--group-add video",
    "--ipc=host",
    "--cap-add=SYS_PTRACE",
    "--security-opt seccomp=unconfined",
    # 000_cadfc2653427814e.txt §Multi-node checklist and troubleshooting (item 2).
    "--shm-size 16G",
)
CUDA_OPTIONS = ("--network=host", "--gpus all", "--ipc=host", "--shm-size 16G")


def render_docker(config: EngineConfig, header: list[str], platform: str | None) -> str:
    """A bash script holding one ``docker run`` command for ``config``.

    Args:
        config: The engine config.
        header: Comment lines from :func:`tuner.export.script.header_lines`.
        platform: The preset's target platform; ``"cuda"`` selects the CUDA
            image and ``--gpus all``, anything else the ROCm image.
    """
    env, _secrets = split_secrets(config.env_vars())
    model, *args = config.serve_args()
    cuda = platform == "cuda"
    image = CUDA_IMAGE if cuda else ROCM_IMAGE
    options = CUDA_OPTIONS if cuda else ROCM_OPTIONS
    out = ["#!/usr/bin/env bash", SHELLCHECK_DIRECTIVE, *header]
    if platform == "cpu":
        out.append(
            "# Note: this preset targets the CPU engine; the ROCm image below needs an AMD GPU."
        )
    out += [
        f"# Runs the config in the {'CUDA' if cuda else 'ROCm'} vLLM image; IMAGE, PORT and",
        "# HF_CACHE override the defaults. Extra arguments go to `vllm serve`.",
        "# HF_TOKEN is passed through by name from your environment, never written here.",
        "set -euo pipefail",
        "",
        f'IMAGE="${{IMAGE:-{image}}}"',
        'PORT="${PORT:-8000}"',
        'HF_CACHE="${HF_CACHE:-$HOME/.cache/huggingface}"',
        "",
        "docker run --rm -it \\",
    ]
    out += [f"  {opt} \\" for opt in options]
    out.append('  -v "$HF_CACHE:/root/.cache/huggingface" \\')
    if model.startswith("/"):
        out.append(f"  -v {shell_quote(model + ':' + model + ':ro')} \\")
    out.append("  -e HF_TOKEN \\")
    out += [f"  -e {shell_quote(f'{name}={value}')} \\" for name, value in env.items()]
    out.append('  "$IMAGE" \\')
    out.append(f"  vllm serve {shell_quote(model)} \\")
    line: list[str] = []
    for item in args:
        if item.startswith("--") and all(c.isalnum() or c == "-" for c in item[2:]) and line:
            out.append(f"  {' '.join(line)} \\")
            line = []
        plain = item.startswith("--") and all(c.isalnum() or c == "-" for c in item[2:])
        line.append(item if plain else shell_quote(item))
    if line:
        out.append(f"  {' '.join(line)} \\")
    out.append('  --host 0.0.0.0 --port "$PORT" "$@"')
    return "\n".join(out) + "\n"


def target_summary(
    platform: str | None, gpu_name: str | None, gpu_count: int | None, vllm: str | None
) -> str:
    """One line describing a target (``vLLM 0.11.0 on rocm, 8 x AMD Instinct MI300X``)."""
    parts = []
    if vllm:
        parts.append(f"vLLM {vllm}")
    if platform:
        parts.append(f"on {platform}")
    text = " ".join(parts)
    if gpu_name or gpu_count:
        gpus = (
            f"{gpu_count} x {gpu_name}"
            if gpu_count and gpu_name
            else str(gpu_name or f"{gpu_count} GPU(s)")
        )
        text = f"{text}, {gpus}" if text else gpus
    return comment_text(text)
