"""The rules' target once introspection and telemetry answered: one rule for both faces.

The rule (the TUI and ``tuner.trials.context`` used to disagree): a value the
user gave wins; else what telemetry measured on this node (GPU count and one
GPU's memory) wins over what introspection reported, because telemetry reads
the device itself and introspection reports no memory size at all
(``tuner.introspect.VllmInfo`` has no VRAM field); else what introspection saw.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from tuner.introspect import IntrospectError, VllmInfo, introspect
from tuner.knobs.gpus import from_telemetry_name
from tuner.rules import Target

GIVEN_NOTE = "given"


def from_introspection(info: VllmInfo | None, error: str | None = None) -> Target:
    """The target the installed vLLM describes, else the catalogue's (with the reason as note)."""
    if info is not None and info.available:
        return Target.from_introspection(info)
    reason = error or (info.error if info is not None else None) or "introspection failed"
    return Target(note=reason or "")


def with_node_gpus(
    target: Target,
    count: int | None,
    vram_gib: float | None,
    name: str | None = None,
    partition: str | None = None,
) -> Target:
    """``target`` with what telemetry measured on this node (measured beats introspected).

    Args:
        target: The target so far.
        count: GPUs visible (0 or None: no GPU, the target is kept).
        vram_gib: One GPU's memory.
        name: The driver's name of the first GPU ("AMD Instinct MI300X"): the rules'
            GPU model (architecture, HBM) when :func:`tuner.knobs.gpus.from_telemetry_name`
            knows it.
        partition: The compute partition telemetry reads ("CPX"; "SPX" and NVIDIA's
            MIG states mean whole GPUs).
    """
    if not count or target.note == GIVEN_NOTE:
        return target
    spec = from_telemetry_name(name)
    if spec is not None:
        target = target.with_gpu(spec, gpus=count, vram_gib=vram_gib)
    split = partition.upper() if partition else None
    return replace(
        target,
        gpus=count,
        vram_gib=vram_gib if vram_gib is not None else target.vram_gib,
        partition=split if split and split != "SPX" and not split.startswith("MIG") else None,
    )


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
    gpus = gpus or getattr(preset_target, "gpu_count", None) or 1
    if version and platform:
        return Target(version, platform, gpus, vram_gib, note=GIVEN_NOTE), notes
    try:
        info: VllmInfo | None = introspect(sys.executable)
    except IntrospectError as exc:
        info = None
        notes.append(f"introspection failed ({exc}); checking against tunelab's catalogue only")
    if info is not None and not info.available:
        notes.append(f"no vLLM here ({info.error}); checking against tunelab's catalogue only")
        info = None
    if info is None:
        return Target(version, platform, gpus, vram_gib, note="catalogue"), notes
    if version and version != info.version:
        # Introspection speaks only for the installed version.
        return Target(
            version, platform or info.platform, gpus, vram_gib, note="given version"
        ), notes
    target = Target.from_introspection(info, gpus=gpus, vram_gib=vram_gib)
    if platform and platform != target.platform:
        target = Target(target.vllm_version, platform, gpus, vram_gib, note="given platform")
    return target, notes
