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

A model on local disk is bind-mounted read-only at the same absolute path.
A relative path (``./models/llama``, or ``models/x`` when that exists here)
is made absolute at export time against the directory tunelab runs in, the
one ``tunelab run`` and ``vllm serve`` resolve it against, because docker
would resolve it against the daemon's working directory, not the user's.
The mount is written as ``--mount type=bind,source=...,target=...``, not
``-v SRC:DST``, which splits on every ``:`` in the path; docker reads the
``--mount`` value as one CSV record, so a field holding ``,`` or ``"`` is
CSV-quoted (:func:`mount_spec`). What cannot be carried (a carriage return,
which CSV reading turns into something else; the root directory) is refused
with :class:`DockerPathError`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tuner.config import EngineConfig
from tuner.errors import EXIT_BAD_INPUT
from tuner.export.env_policy import split_secrets
from tuner.export.errors import ExportError
from tuner.export.quoting import comment_text, shell_quote
from tuner.export.script import SHELLCHECK_DIRECTIVE, arg_word

ROCM_IMAGE = "rocm/vllm:latest"
CUDA_IMAGE = "vllm/vllm-openai:latest"
# vLLM's own release images are tagged v<version> (vllm/vllm-openai:v0.11.0,
# the tags docs.vllm.ai's "Using Docker" page pulls). AMD's rocm/vllm tags
# name the ROCm release and a build date as well
# (rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909), so the tag cannot be derived
# from the vLLM version alone; the reference docs only name rolling tags
# (rocm/vllm:instinct_main in 004_c4561cd56ddb4be5.txt §2. Launching the
# Container, rocm/vllm-dev:main in 003_383fc7ac89897e18.txt).
CUDA_IMAGE_PINNED = "vllm/vllm-openai:v{version}"
_RELEASE_RE = re.compile(r"\d+\.\d+\.\d+\Z")


def pick_image(platform: str | None, vllm_version: str | None) -> tuple[str, str]:
    """The default image for a target and one comment line saying whether it is pinned.

    Returns:
        ``(image, note)``: a tag of the benchmarked vLLM release where one is
        known, else the rolling tag with a note saying that it is not pinned.
    """
    release = vllm_version if vllm_version and _RELEASE_RE.match(vllm_version) else None
    if platform == "cuda":
        if release:
            image = CUDA_IMAGE_PINNED.format(version=release)
            return image, f"# Image pinned to the benchmarked vLLM {release}."
        what = f"vLLM {comment_text(vllm_version, 40)}" if vllm_version else "an unknown vLLM"
        return CUDA_IMAGE, f"# Not pinned: no release image is known for {what}; set IMAGE."
    what = f"vLLM {comment_text(vllm_version, 40)}" if vllm_version else "the benchmarked vLLM"
    return ROCM_IMAGE, (
        f"# Not pinned: rocm/vllm tags name the ROCm release and build date, so no tag is "
        f"known for {what}; set IMAGE to one built with it."
    )


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


class DockerPathError(ExportError):
    """A local model path the docker script cannot mount faithfully (bad input: exit 2)."""

    exit_code = EXIT_BAD_INPUT


def local_model_path(model: str, base: Path) -> str | None:
    """The absolute host path of ``model`` when it names a local path, else None (a hub id).

    A path is what starts with ``/``, ``./``, ``../`` or ``~``, or what exists
    under ``base`` (``models/x`` with a ``models/x`` folder here, as ``vllm
    serve`` would take it); anything else is a Hugging Face id.
    """
    if model.startswith(("/", "./", "../", "~")) or model in (".", ".."):
        path = os.path.expanduser(model)
    else:
        try:
            exists = (base / model).exists()
        except (OSError, ValueError):  # too long, NUL: not a file here
            exists = False
        if not exists:
            return None
        path = model
    return os.path.normpath(os.path.join(base, path))


def mount_spec(path: str) -> str:
    """``type=bind,source=PATH,target=PATH,readonly``, each field CSV-quoted where needed.

    Docker parses the ``--mount`` value with Go's encoding/csv (docker/cli
    opts/mount.go ``MountOpt.Set``), then splits each field at its first
    ``=``: a path may hold ``:`` and ``=``; ``,`` and ``"`` need CSV quoting.

    Raises:
        DockerPathError: the path holds a carriage return (CSV reading drops it
            before a newline) or is the root directory (docker refuses ``/``).
    """
    if "\r" in path:
        raise DockerPathError(
            f"the model path {path[:60]!r} holds a carriage return, which docker's --mount "
            "cannot carry",
            fix="rename the model directory, or mount it yourself and use the sh script",
        )
    if path == "/":
        raise DockerPathError(
            "the model path is the root directory /, which docker cannot mount",
            fix="point the preset's model at the model's own directory",
        )
    fields = ["type=bind", f"source={path}", f"target={path}", "readonly"]
    return ",".join(_csv_field(f) for f in fields)


def _csv_field(field: str) -> str:
    if any(c in field for c in ',"\n') or field[:1].isspace():
        return '"' + field.replace('"', '""') + '"'
    return field


def render_docker(
    config: EngineConfig,
    header: list[str],
    platform: str | None,
    vllm_version: str | None = None,
    base: Path | None = None,
) -> str:
    """A bash script holding one ``docker run`` command for ``config``.

    Args:
        config: The engine config.
        header: Comment lines from :func:`tuner.export.script.header_lines`.
        platform: The preset's target platform; ``"cuda"`` selects the CUDA
            image and ``--gpus all``, anything else the ROCm image.
        vllm_version: The benchmarked vLLM; pins the image where a tag is known.
        base: The directory a relative model path is relative to (default:
            the current directory, where ``tunelab run`` would resolve it).

    Raises:
        DockerPathError: a local model path that cannot be mounted faithfully.
        QuotingError: a value holds a NUL byte.
    """
    env, _secrets = split_secrets(config.env_vars())
    model, *args = config.serve_args()
    local = local_model_path(model, base or Path.cwd())
    cuda = platform == "cuda"
    image, image_note = pick_image(platform, vllm_version)
    options = CUDA_OPTIONS if cuda else ROCM_OPTIONS
    out = ["#!/usr/bin/env bash", SHELLCHECK_DIRECTIVE, *header]
    if platform == "cpu":
        out.append(
            "# Note: this preset targets the CPU engine; the ROCm image below needs an AMD GPU."
        )
    if local is not None and local != model:
        out.append(
            f"# The model path {comment_text(model, 80)} was made absolute at export time: "
            f"{comment_text(local, 120)}"
        )
    out += [
        f"# Runs the config in the {'CUDA' if cuda else 'ROCm'} vLLM image; IMAGE, PORT and",
        "# HF_CACHE override the defaults. Extra arguments go to `vllm serve`.",
        image_note,
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
    if local is not None:
        out.append(f"  --mount {shell_quote(mount_spec(local))} \\")
    out.append("  -e HF_TOKEN \\")
    out += [f"  -e {shell_quote(f'{name}={value}')} \\" for name, value in env.items()]
    out.append('  "$IMAGE" \\')
    out.append(f"  vllm serve {shell_quote(local or model)} \\")
    out += [f"  {arg_word(item)} \\" for item in args]
    out.append('  --host=0.0.0.0 --port="$PORT" "$@"')
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
