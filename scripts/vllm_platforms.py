"""What each vLLM platform class decides for every config, read from its source.

Two answers the rules and the TUI's dropdowns need before any engine starts:

- ``static_graphs``: the platform's ``support_static_graph_mode()`` (vllm/platforms/
  interface.py returns False; cuda.py and rocm.py override it with True). Where it is
  False, vLLM sets ``cudagraph_mode`` to NONE whatever was asked (0.32 config/vllm.py,
  the ``else`` of ``support_static_graph_mode``).
- ``attention_backends``: the backends the platform's ``get_attn_backend_cls`` can
  return, where that method returns fixed enum members (the CPU platform: CPU_ATTN,
  CPU_MLA, AMX_MLA, logging "Cannot use %s backend on CPU." for any other request).
  None where the choice is a walk over priorities (CUDA, ROCm: tuner.vllm_tables.attention).

The platform modules import device libraries (amdsmi, the CUDA runtime) that a build
machine lacks, so they are read with ``ast``, never imported.
"""

from __future__ import annotations

import ast
import pathlib
from typing import Any

# cuda.py's ``CudaPlatform`` is an alias of one of two subclasses of this base, which
# holds the methods read here.
PLATFORMS = (("cpu", "cpu.py", "CpuPlatform"), ("cuda", "cuda.py", "CudaPlatformBase"),
             ("rocm", "rocm.py", "RocmPlatform"))  # fmt: skip


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _constant_return(fn: ast.FunctionDef | None) -> bool | None:
    """The bool a method returns when its body is ``return True/False``; None otherwise."""
    if fn is None:
        return None
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    values = {n.value.value for n in returns if isinstance(n.value, ast.Constant)}
    if len(returns) == len(values) == 1 and isinstance(next(iter(values)), bool):
        return bool(next(iter(values)))
    return None


def _returned_backends(fn: ast.FunctionDef | None) -> list[str] | None:
    """``X`` of every ``return AttentionBackendEnum.X.get_path()``; None when a return is
    anything else (the method walks a priority list: no fixed set)."""
    if fn is None:
        return None
    found: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        call = node.value
        ok = (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "get_path"
            and isinstance(call.func.value, ast.Attribute)
            and isinstance(call.func.value.value, ast.Name)
            and call.func.value.value.id == "AttentionBackendEnum"
        )
        if not ok:
            return None
        found.add(call.func.value.attr)  # type: ignore[union-attr]
    return sorted(found) or None


def platform_table(vllm_root: pathlib.Path) -> dict[str, Any]:
    """The ``platforms`` section of the release's table (see the module docstring)."""
    folder = vllm_root / "platforms"
    base = _class(ast.parse((folder / "interface.py").read_text()), "Platform")
    default_static = _constant_return(_method(base, "support_static_graph_mode"))
    out: dict[str, Any] = {}
    for name, file, cls_name in PLATFORMS:
        cls = _class(ast.parse((folder / file).read_text()), cls_name)
        static = _constant_return(_method(cls, "support_static_graph_mode"))
        out[name] = {
            "source": f"vllm/platforms/{file} {cls_name}",
            "static_graphs": default_static if static is None else static,
            "attention_backends": _returned_backends(_method(cls, "get_attn_backend_cls")),
        }
    return out
