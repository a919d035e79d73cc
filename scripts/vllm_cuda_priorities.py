"""Reads CUDA's attention-backend priority order from the installed vLLM, by static reading.

Part of ``scripts/vllm_tables.py``. ``vllm/platforms/cuda.py`` cannot be imported from the CPU
wheel (it loads CUDA's compiled ops at import), so its ``_get_backend_priorities`` — a pure
function of the layer and the GPU — is compiled alone from the file's own source and called
over a grid of its inputs: MLA or not, each compute capability, every ``--kv-cache-dtype``,
head counts and head sizes, non-causal and multimodal-prefix layers. Within each (MLA,
capability) cell only the inputs that change the order are kept, and rows with the same order
are merged into value lists, so the table stays small and a lookup with a value that was
never probed finds no row (tunelab then stays silent rather than guess).
"""

from __future__ import annotations
import __future__

import ast
import importlib.util
import inspect
import itertools
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

CUDA_CAPS = ((7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0))
HEAD_COUNTS = (1, 2, 4, 8, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128)
SOURCE = "vllm/platforms/cuda.py _get_backend_priorities"


def _function() -> Callable[..., Any]:
    """``_get_backend_priorities`` compiled from cuda.py's source, with vLLM's own enums."""
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    spec = importlib.util.find_spec("vllm.platforms.cuda")
    assert spec is not None and spec.origin is not None
    source = pathlib.Path(spec.origin).read_text()
    tree = ast.parse(source)
    found = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name == "_get_backend_priorities"
    ]
    if not found:
        raise LookupError(f"no _get_backend_priorities in {spec.origin}")
    found[0].decorator_list = []  # functools.cache: memoises, does not change the answer
    module = ast.Module(body=found, type_ignores=[])
    flags = __future__.annotations.compiler_flag
    code = compile(module, spec.origin, "exec", flags=flags, dont_inherit=True)
    names: dict[str, Any] = {
        "AttentionBackendEnum": AttentionBackendEnum,
        "DeviceCapability": DeviceCapability,
    }
    names.update(_imported_names(tree, found[0], names))
    exec(code, names)  # one function of vLLM's own source, nothing else
    return names["_get_backend_priorities"]  # type: ignore[no-any-return]


def _imported_names(
    tree: ast.Module, func: ast.FunctionDef, have: dict[str, Any]
) -> dict[str, Any]:
    """The helpers the function calls that cuda.py imports from vLLM's pure modules (0.23's
    ``is_quantized_kv_cache`` ...), imported from where cuda.py imports them."""
    import importlib

    used = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)} - set(have)
    out: dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("vllm."):
            continue
        for alias in node.names:
            local = alias.asname or alias.name
            if local not in used:
                continue
            try:
                out[local] = getattr(importlib.import_module(node.module or ""), alias.name)
            except (ImportError, AttributeError):
                continue  # a compiled-ops module: the call fails and says so
    return out


def cuda_priorities(head_sizes: Sequence[int], kv_dtypes: Sequence[str]) -> dict[str, Any]:
    """CUDA's order per (MLA, capability) cell, over the inputs that matter in the cell."""
    from vllm.platforms.interface import DeviceCapability

    func = _function()
    params = inspect.signature(func).parameters
    grid: dict[str, Sequence[Any]] = {
        "num_heads": HEAD_COUNTS,
        "kv_cache_dtype": tuple(kv_dtypes),
        "use_non_causal": (False, True),
        "head_size": tuple(head_sizes),
        "use_mm_prefix": (False, True),
    }
    names = [n for n in grid if n in params]  # an older release asks for fewer
    cells = []
    for mla, (major, minor) in itertools.product((False, True), CUDA_CAPS):
        results: dict[tuple[Any, ...], tuple[str, ...]] = {}
        for values in itertools.product(*(grid[n] for n in names)):
            kwargs = dict(zip(names, values, strict=True))
            order = func(mla, DeviceCapability(major, minor), **kwargs)
            results[values] = tuple(b.name for b in order)
        keep = [i for i in range(len(names)) if _matters(results, i)]
        rows = _merged(results, keep, names)
        cells.append({"mla": mla, "capability": f"{major}.{minor}", "rows": rows})
    return {"inputs": names, "probes": {n: list(grid[n]) for n in names}, "cells": cells}


def _matters(results: dict[tuple[Any, ...], tuple[str, ...]], i: int) -> bool:
    """True when input ``i`` changes the order with every other input held."""
    seen: dict[tuple[Any, ...], tuple[str, ...]] = {}
    for values, order in results.items():
        rest = values[:i] + values[i + 1 :]
        if seen.setdefault(rest, order) != order:
            return True
    return False


def _merged(
    results: dict[tuple[Any, ...], tuple[str, ...]], keep: list[int], names: list[str]
) -> list[dict[str, Any]]:
    """Rows over the kept inputs, merged into value lists where the order is the same."""
    rows: dict[tuple[Any, ...], tuple[str, ...]] = {}
    for values, order in results.items():
        rows[tuple(values[i] for i in keep)] = order
    merged: list[tuple[list[set[Any]], tuple[str, ...]]] = [
        ([{v} for v in key], order) for key, order in rows.items()
    ]
    changed = True
    while changed:
        changed = False
        for a, b in itertools.combinations(range(len(merged)), 2):
            (va, oa), (vb, ob) = merged[a], merged[b]
            if oa != ob:
                continue
            differ = [k for k in range(len(keep)) if va[k] != vb[k]]
            if len(differ) <= 1:
                for k in differ:
                    va[k] |= vb[k]
                del merged[b]
                changed = True
                break
    out = []
    for sets, order in merged:
        when = {names[keep[k]]: sorted(s, key=str) for k, s in enumerate(sets)}
        out.append({"when": when, "order": list(order)})
    return out
