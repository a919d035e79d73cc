"""Weight sizes from safetensors metadata, without loading a single weight.

A safetensors file starts with an 8-byte little-endian length and a JSON
header listing every tensor's dtype, shape and byte range, so reading the
first kilobytes of each shard gives exact parameter counts and bytes. When the
shards are not on disk, ``model.safetensors.index.json`` still carries
``metadata.total_size``; on the hub, ``huggingface_hub.get_safetensors_metadata``
reads the same headers with HTTP range requests.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import TunelabError

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


def read_header(path: Path) -> dict[str, Any]:
    """The JSON header of one safetensors file.

    Raises:
        SafetensorsError: for a truncated or malformed file (says which).
    """
    with path.open("rb") as fh:
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
        header = json.loads(blob)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SafetensorsError(f"{path} has a header that is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path} has a header that is not a JSON object")
    return header


def local_weights(directory: Path) -> WeightsMeta | None:
    """Sizes from the safetensors shards in ``directory``, or its index; None if neither.

    Shards are read only when all of them are present; a partial download falls
    back to the index's ``total_size``.
    """
    index = directory / "model.safetensors.index.json"
    shards = sorted(directory.glob("*.safetensors"))
    expected: set[str] | None = None
    index_data: dict[str, Any] | None = None
    if index.is_file():
        try:
            index_data = json.loads(index.read_text())
            expected = set((index_data.get("weight_map") or {}).values())
        except (OSError, json.JSONDecodeError):
            index_data = None
    have = {p.name for p in shards}
    if shards and (expected is None or expected <= have):
        by_dtype: dict[str, int] = {}
        total = 0
        for shard in shards if expected is None else [directory / n for n in sorted(expected)]:
            for name, spec in read_header(shard).items():
                if name == "__metadata__" or not isinstance(spec, dict):
                    continue
                count = math.prod(int(d) for d in spec.get("shape", []))
                start, end = spec.get("data_offsets", [0, 0])
                total += int(end) - int(start)
                dtype = str(spec.get("dtype", "?"))
                by_dtype[dtype] = by_dtype.get(dtype, 0) + count
        return WeightsMeta(total, sum(by_dtype.values()), by_dtype, "safetensors")
    if index_data is not None:
        size = (index_data.get("metadata") or {}).get("total_size")
        if isinstance(size, int | float) and size > 0:
            return WeightsMeta(int(size), None, {}, "index")
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
