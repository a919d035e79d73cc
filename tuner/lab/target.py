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

from tuner.introspect import IntrospectError, VllmInfo, introspect
from tuner.rules import Target
from tuner.rules.node_target import (
    GIVEN_NOTE,
    NodeGpus,
    from_introspection,
    read_backend,
    read_node_gpus,
)
from tuner.rules.node_target import with_node_gpus as _with_node_gpus

__all__ = [
    "GIVEN_NOTE",
    "NodeGpus",
    "for_check",
    "from_introspection",
    "read_backend",
    "with_node_gpus",
]


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
