"""The rules' target for this node: what vLLM says of itself plus what its GPUs measure.

One function builds it for every face (issue 28: it was built three ways, so a
config on an 8×MI300X CPX node got ``cpx-partition-tensor-parallel`` and
``nccl-min-nchannels-mi300`` in the TUI and neither from ``tunelab run``). The
rule: a value the user gave wins; else what telemetry measured on this node
(GPU count, one GPU's memory, its model from the driver's name, the compute
partition) wins over what introspection reported, because telemetry reads the
device itself and introspection reports no memory size at all
(``tuner.introspect.VllmInfo`` has no VRAM field); else what introspection saw.
The TUI reads the GPUs from its own sampler, the trial runner and ``check``
through :func:`read_node_gpus`; both hand the reading to :func:`with_node_gpus`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

from tuner.introspect import VllmInfo
from tuner.knobs.gpus import from_telemetry_name
from tuner.rules.types import Target
from tuner.telemetry import Backend, select_backend

GIVEN_NOTE = "given"


@dataclass(frozen=True)
class NodeGpus:
    """What telemetry reads of this node's GPUs (count 0: none).

    Attributes:
        count: GPUs visible.
        vram_gib: One GPU's memory.
        name: The driver's name of the first GPU ("AMD Instinct MI300X").
        partition: Its compute partition ("CPX"; "SPX" and MIG states mean whole GPUs).
    """

    count: int = 0
    vram_gib: float | None = None
    name: str | None = None
    partition: str | None = None


def from_introspection(info: VllmInfo | None, error: str | None = None) -> Target:
    """The target the installed vLLM describes, else the catalogue's (with the reason as note)."""
    if info is not None and info.available:
        return Target.from_introspection(info)
    reason = error or (info.error if info is not None else None) or "introspection failed"
    return Target(note=reason or "")


def with_node_gpus(target: Target, gpus: NodeGpus) -> Target:
    """``target`` with what telemetry measured on this node (measured beats introspected).

    A given target (``check --platform ... --gpus ...``) is kept as typed; no GPU
    keeps the target as it is. A GPU model tunelab knows by its driver name
    sets the rules' architecture and HBM (tuner.knobs.gpus).
    """
    if not gpus.count or target.note == GIVEN_NOTE:
        return target
    spec = from_telemetry_name(gpus.name)
    if spec is not None:
        target = target.with_gpu(spec, gpus=gpus.count, vram_gib=gpus.vram_gib)
    split = gpus.partition.upper() if gpus.partition else None
    return replace(
        target,
        gpus=gpus.count,
        vram_gib=gpus.vram_gib if gpus.vram_gib is not None else target.vram_gib,
        partition=split if split and split != "SPX" and not split.startswith("MIG") else None,
    )


def read_backend(backend: Backend, count: int | None = None) -> NodeGpus:
    """The node's GPUs from an opened backend (``count`` overrides how many it shows).

    Never raises: a driver that fails reads as what it could give.
    """
    try:
        seen = backend.count()
        first = backend.snapshot(0) if seen else None
    except Exception:  # a missing metric is a value, never a crash
        seen, first = 0, None
    total = first.vram_total if first is not None else None
    return NodeGpus(
        count=seen if count is None else count,
        vram_gib=total / 1024**3 if total else None,
        name=first.name if first is not None else None,
        partition=first.compute_partition if first is not None else None,
    )


def read_node_gpus(count: int | None = None) -> NodeGpus:
    """The node's GPUs, read once through the first telemetry backend that works.

    ``count``: how many GPUs the caller already knows are visible (a forced
    count in tests); None: as many as telemetry shows.
    """
    if count == 0:
        return NodeGpus()
    try:
        backend = select_backend("auto")
    except Exception:
        return NodeGpus(count or 0)
    try:
        return read_backend(backend, count)
    finally:
        with contextlib.suppress(Exception):
            backend.close()
