"""The rules' target as the faces ask for it: this node's (tuner.rules.node_target) or a given one.

The node's target is built by one function for every face
(:func:`tuner.rules.node_target.with_node_gpus`: a value the user gave wins; else
what telemetry measured beats what introspection reported); the TUI reaches it
here, with the GPUs its own sampler read. ``check`` and ``presets check`` add
what the user typed (:func:`for_check`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from tuner.errors import TunelabError
from tuner.introspect import IntrospectError, VllmInfo, introspect
from tuner.knobs.gpus import lookup
from tuner.knobs.versions import parse_version
from tuner.rules import Target
from tuner.rules.node_target import (
    GIVEN_NOTE,
    NodeGpus,
    from_introspection,
    read_backend,
    read_node_gpus,
)
from tuner.rules.node_target import with_node_gpus as _with_node_gpus

PREVIEW_NOTE = "preview"
# The words that end a preview in the TUI's target dialog.
THIS_NODE = ("this node", "node", "here", "local")
PLATFORMS = ("rocm", "cuda", "cpu")

__all__ = [
    "GIVEN_NOTE",
    "PREVIEW_NOTE",
    "NodeGpus",
    "PreviewError",
    "for_check",
    "from_introspection",
    "parse_preview",
    "preview",
    "preview_label",
    "read_backend",
    "with_node_gpus",
]


class PreviewError(TunelabError, ValueError):
    """A previewed target tunelab cannot build: an unknown GPU, platform or version."""


def with_node_gpus(
    target: Target,
    count: int | None,
    vram_gib: float | None,
    name: str | None = None,
    partition: str | None = None,
) -> Target:
    """``target`` with what the TUI's telemetry measured (tuner.rules.node_target's rule)."""
    return _with_node_gpus(target, NodeGpus(count or 0, vram_gib, name, partition))


def for_check(
    version: str | None,
    platform: str | None,
    gpus: int | None,
    vram_gib: float | None,
    preset_target: Any = None,
) -> tuple[Target, list[str]]:
    """The target ``tunelab check`` and ``presets check`` judge against, and notes on it.

    The precedence: what the user typed, then the preset's ``[target]``;
    when both a version and a platform are known that is the target ("given").
    Otherwise the installed vLLM answers (introspection in a subprocess) —
    but only for its own version: a different version asked for keeps the
    catalogue's view of that version. Without a usable vLLM the catalogue
    alone ("catalogue"), with a note saying so.
    """
    notes: list[str] = []
    version = version or getattr(preset_target, "vllm_version", None)
    platform = platform or getattr(preset_target, "platform", None)
    gpus = gpus or getattr(preset_target, "gpu_count", None)
    if version and platform:
        return Target(version, platform, gpus or 1, vram_gib, note=GIVEN_NOTE), notes
    try:
        info: VllmInfo | None = introspect(sys.executable)
    except IntrospectError as exc:
        info = None
        notes.append(f"introspection failed ({exc}); checking against tunelab's catalogue only")
    if info is not None and not info.available:
        notes.append(f"no vLLM here ({info.error}); checking against tunelab's catalogue only")
        info = None
    if info is None:
        return Target(version, platform, gpus or 1, vram_gib, note="catalogue"), notes
    if version and version != info.version:
        # Introspection speaks only for the installed version.
        return Target(
            version, platform or info.platform, gpus or 1, vram_gib, note="given version"
        ), notes
    if platform and platform != info.platform:
        return Target(info.version, platform, gpus or 1, vram_gib, note="given platform"), notes
    # This node, as a trial on it would be judged (tuner.rules.node_target); what the
    # user typed (--gpus, --vram-gib, the preset's gpu_count) still wins.
    target = _with_node_gpus(Target.from_introspection(info), read_node_gpus())
    if gpus or vram_gib:
        target = replace(target, gpus=gpus or target.gpus, vram_gib=vram_gib or target.vram_gib)
    return target, notes


def preview(
    gpu: str | None = None, platform: str | None = None, version: str | None = None
) -> Target:
    """Another node's target, to read the findings a config would get there (from a laptop).

    ``tunelab tui --gpu MI300X`` and the TUI's target dialog build it here, the
    way ``tunelab check --gpu`` does: the GPU gives the platform, architecture,
    memory and count (tuner.knobs.gpus); the version defaults to the one tunelab's
    tables were generated from.

    Raises:
        PreviewError: no GPU and no platform, an unknown platform or version.
        GpuNameError: a GPU tunelab does not know (its message lists the known ones).
    """
    from tuner.vllm_tables import DEFAULT_VERSION

    spec = lookup(gpu) if gpu else None
    plat = (platform or (spec.platform if spec else "")).lower() or None
    if plat is None:
        raise PreviewError(
            "a preview needs a GPU or a platform", fix="e.g. --gpu MI300X, or --platform cuda"
        )
    if plat not in PLATFORMS:
        raise PreviewError(f"unknown platform {platform!r}", fix="rocm, cuda or cpu")
    wanted = version or DEFAULT_VERSION
    try:
        parse_version(wanted)
    except ValueError as exc:
        raise PreviewError(f"vLLM version {wanted!r}: {exc}", fix="e.g. 0.32.0") from None
    return Target(wanted, plat, note=PREVIEW_NOTE).with_gpu(spec)


def parse_preview(text: str) -> Target | None:
    """The target dialog's text: ``MI300X``, ``8xH100 0.32.0``, ``cuda``; None for this node.

    Words are a GPU, a platform or a version, in any order.

    Raises:
        PreviewError, GpuNameError: as :func:`preview`, or a word that is none of the three.
    """
    words = text.strip().split()
    if not words or " ".join(words).lower() in THIS_NODE:
        return None
    gpu = platform = version = None
    for word in words:
        if word.lower() in PLATFORMS:
            platform = word.lower()
        elif word[:1].isdigit() and "." in word and "x" not in word.lower():
            version = word
        elif gpu is None:
            gpu = word
        else:
            raise PreviewError(
                f"{word!r}: one GPU, one platform and one version at most",
                fix="e.g. MI300X 0.32.0, or `this node` to judge this node again",
            )
    return preview(gpu, platform, version)


def preview_label(target: Target) -> str:
    """``preview: vLLM 0.32.0 on ROCM · 8× MI300X 192 GiB (not this node)`` for the header."""
    gpus = ""
    if target.gpu_name:
        memory = f" {target.vram_gib:.0f} GiB" if target.vram_gib else ""
        part = f" {target.partition}" if target.partition else ""
        gpus = f" · {target.gpus}× {target.gpu_name}{part}{memory}"
    platform = (target.platform or "?").upper()
    return f"preview: vLLM {target.vllm_version} on {platform}{gpus} (not this node)"
