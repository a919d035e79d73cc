"""Weight sizes from safetensors metadata, without loading a single weight.

A safetensors file starts with an 8-byte little-endian length and a JSON
header listing every tensor's dtype, shape and byte range, so reading the
first kilobytes of each shard gives exact parameter counts and bytes. When the
shards are not on disk, ``model.safetensors.index.json`` still carries
``metadata.total_size``; on the hub, ``huggingface_hub.get_safetensors_metadata``
reads the same headers with HTTP range requests.
"""

from __future__ import annotations

import math
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tuner import bounded
from tuner.errors import TunelabError
from tuner.model.config_check import whole_in

# Largest header we accept: real ones are kilobytes to a few MB.
MAX_HEADER_BYTES = 100 * 1024 * 1024

DTYPE_SIZES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}


class SafetensorsError(TunelabError, ValueError):
    """A safetensors file whose header cannot be read."""


@dataclass(frozen=True)
class WeightsMeta:
    """What the metadata says.

    Attributes:
        total_bytes: Bytes of all tensors.
        elements: Tensor elements (parameters, or packed elements for quantized dtypes).
        by_dtype: Elements per safetensors dtype.
        source: safetensors, index or hub-metadata.
    """

    total_bytes: int
    elements: int | None
    by_dtype: dict[str, int]
    source: str


# Largest index file we read (real ones: tens of KB to a few MB).
MAX_INDEX_BYTES = 64 * 1024 * 1024
# Bounds on one tensor's figures, far above any real checkpoint (a whole 1T-parameter
# model is ~2**41 bytes): a header past them is corrupt or hostile, not big.
MAX_TENSOR_ELEMENTS = 2**50
MAX_TENSOR_DIMS = 16
MAX_TOTAL_BYTES = 2**56


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (a FIFO would block forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise SafetensorsError(f"{path} is not a regular file")
    return fh


def read_header(path: Path) -> dict[str, Any]:
    """The JSON header of one safetensors file.

    Raises:
        SafetensorsError: for a truncated or malformed file (says which).
    """
    with _open_regular(path) as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path} is too short to be a safetensors file")
        (length,) = struct.unpack("<Q", head)
        if length <= 0 or length > MAX_HEADER_BYTES:
            raise SafetensorsError(f"{path} has an implausible header length {length}")
        blob = fh.read(length)
    if len(blob) != length:
        raise SafetensorsError(f"{path} is truncated inside its header")
    try:
        header = bounded.loads(blob, what="safetensors header")
    except ValueError as exc:  # not JSON, not UTF-8, nested too deep, int past the digit limit
        raise SafetensorsError(f"{path} has a header that is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path} has a header that is not a JSON object")
    return header


def tensor_sizes(path: Path, name: str, spec: Any) -> tuple[str, int, int]:
    """(dtype, elements, bytes) of one header entry, checked: every figure a sane whole number.

    Raises:
        SafetensorsError: a shape or offsets that are not whole numbers in range
            (``1e400`` reads as infinity; a hostile header may hold anything).
    """
    shape = spec.get("shape", []) if isinstance(spec, dict) else None
    offsets = spec.get("data_offsets", [0, 0]) if isinstance(spec, dict) else None
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_TENSOR_DIMS
        or not all(_whole(d, MAX_TENSOR_ELEMENTS) for d in shape)
        or math.prod(shape) > MAX_TENSOR_ELEMENTS
    ):
        raise SafetensorsError(f"{path}: tensor {name[:80]!r} has an unreadable shape")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_whole(o, MAX_TOTAL_BYTES) for o in offsets)
        or offsets[1] < offsets[0]
    ):
        raise SafetensorsError(f"{path}: tensor {name[:80]!r} has unreadable data offsets")
    return str(spec.get("dtype", "?"))[:32], math.prod(shape), offsets[1] - offsets[0]


def _whole(value: Any, bound: int) -> bool:
    """An int from 0 to ``bound`` (the safetensors format writes integers only)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= bound


def _read_index(index: Path) -> tuple[dict[str, Any] | None, set[str] | None]:
    """(the index document, the shard names it expects); (None, None) when unreadable."""
    try:
        data = bounded.loads(
            bounded.read_bytes(index, max_bytes=MAX_INDEX_BYTES, what="safetensors index"),
            what="safetensors index",
        )
    except (OSError, ValueError):  # unreadable, not a file, too large, not JSON
        return None, None
    if not isinstance(data, dict):
        return None, None
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        return data, None
    return data, set(weight_map.values())


def local_weights(directory: Path) -> WeightsMeta | None:
    """Sizes from the safetensors shards in ``directory``, or its index; None if neither.

    Shards are read only when all of them are present; a partial download falls
    back to the index's ``total_size``.
    """
    index = directory / "model.safetensors.index.json"
    shards = sorted(directory.glob("*.safetensors"))
    index_data, expected = _read_index(index) if index.is_file() else (None, None)
    have = {p.name for p in shards}
    if shards and (expected is None or expected <= have):
        by_dtype: dict[str, int] = {}
        total = 0
        for shard in shards if expected is None else [directory / n for n in sorted(expected)]:
            for name, spec in read_header(shard).items():
                if name == "__metadata__" or not isinstance(spec, dict):
                    continue
                dtype, count, size = tensor_sizes(shard, name, spec)
                total += size
                by_dtype[dtype] = by_dtype.get(dtype, 0) + count
        if total > MAX_TOTAL_BYTES:
            raise SafetensorsError(f"{directory}: the shards claim an implausible {total:,} bytes")
        return WeightsMeta(total, sum(by_dtype.values()), by_dtype, "safetensors")
    if index_data is not None:
        meta = index_data.get("metadata")
        total_size = meta.get("total_size") if isinstance(meta, dict) else None
        if whole_in(total_size, 1, MAX_TOTAL_BYTES):
            return WeightsMeta(int(total_size), None, {}, "index")
    return None


def hub_weights(repo_id: str, revision: str | None = None) -> WeightsMeta | None:
    """Sizes from the hub's safetensors headers (HTTP range requests; no weights)."""
    # Deferred: heavy (huggingface_hub): loaded only on the path that needs it.
    from huggingface_hub import get_safetensors_metadata

    try:
        meta = get_safetensors_metadata(repo_id, revision=revision)
    except Exception:
        return None
    by_dtype = {str(k): int(v) for k, v in (meta.parameter_count or {}).items()}
    total = sum(n * DTYPE_SIZES.get(d, 2) for d, n in by_dtype.items())
    return WeightsMeta(total, sum(by_dtype.values()), by_dtype, "hub-metadata")
