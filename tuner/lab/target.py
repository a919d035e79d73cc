"""The rules' target once introspection and telemetry answered: one rule for both faces.

The rule (the TUI and ``tuner.trials.context`` used to disagree): a value the
user gave wins; else what telemetry measured on this node (GPU count and one
GPU's memory) wins over what introspection reported, because telemetry reads
the device itself and introspection reports no memory size at all
(``tuner.introspect.VllmInfo`` has no VRAM field); else what introspection saw.
"""

from __future__ import annotations

from dataclasses import replace

from tuner.introspect import VllmInfo
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
