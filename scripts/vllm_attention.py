"""Reads what each attention backend of the installed vLLM accepts, by asking vLLM's own classes.

Part of ``scripts/vllm_tables.py`` (it imports vLLM; tunelab never does). For every member of
``AttentionBackendEnum`` the backend class's own predicates — ``supports_head_size``,
``supports_kv_cache_dtype``, ``supports_block_size``, ``is_mla``, ``is_sparse``,
``supports_sink``, ``supports_attn_type``, ``supports_compute_capability`` — are evaluated over
the values a config can take (every ``--kv-cache-dtype`` and ``--block-size`` choice, the head
sizes vLLM's backends name, each ROCm GPU architecture and CUDA compute capability), so the
table records vLLM's answers, not a reading of its guides. ROCm's architecture checks read the
GPU at import (``vllm/platforms/rocm.py`` ``_ON_*`` flags): each architecture is evaluated by
re-running those module-level assignments, as vLLM's source writes them, for that ``gfx`` name.

The platforms' priority lists (``_get_backend_priorities`` of ``platforms/rocm.py``) are read
the same way, for each state of the AITER switches they consult; CUDA's, which cannot be
imported here, by static reading (``scripts/vllm_cuda_priorities.py``). A backend whose module cannot
be imported here (its kernel library is absent from this wheel) is recorded as ``unreadable``
with the reason: tunelab then says it cannot check it, never that it is invalid.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import pathlib
import re
import typing
from collections.abc import Iterator
from typing import Any

from vllm_cuda_priorities import cuda_priorities

ATTN_TYPES = ("decoder", "encoder", "encoder_only", "encoder_decoder")
HEAD_PROBES = (32, 40, 48, 64, 72, 80, 96, 112, 120, 128, 160, 192, 224, 256, 320, 512, 576)
BLOCK_PROBES = (1, 8, 16, 32, 48, 64, 128, 256, 512)
ROCM_ARCHS = ("gfx90a", "gfx942", "gfx950")
CUDA_CAPS = ((7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0))


def _amdsmi_stand_in() -> None:
    """Lets ``vllm.platforms.rocm`` import on a machine without ROCm's ``libamd_smi.so``.

    A STAND-IN for the GPU library, not vLLM: its one answer is a ``gfx942`` device, which
    :func:`rocm_arch` replaces by each architecture in turn. The real library is used where
    it loads.
    """
    import sys
    import types

    try:
        import amdsmi  # noqa: F401

        return
    except Exception:
        pass
    from vllm.platforms import current_platform

    _ = current_platform.device_type  # resolved first: the stand-in must not make this "rocm"
    stub = types.ModuleType("amdsmi")
    stub.AmdSmiException = type("AmdSmiException", (Exception,), {})  # type: ignore[attr-defined]
    stub.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)  # type: ignore[attr-defined]
    stub.amdsmi_init = stub.amdsmi_shut_down = lambda *a, **k: None  # type: ignore[attr-defined]
    stub.amdsmi_get_processor_handles = lambda: [0]  # type: ignore[attr-defined]
    stub.amdsmi_get_gpu_asic_info = lambda h: {"target_graphics_version": "gfx942"}  # type: ignore[attr-defined]
    for name in (
        "amdsmi_get_gpu_device_uuid",
        "amdsmi_get_gpu_memory_total",
        "amdsmi_topo_get_link_type",
        "amdsmi_topo_get_numa_node_number",
    ):
        setattr(stub, name, lambda *a, **k: 0)
    sys.modules["amdsmi"] = stub


def _kv_dtypes() -> list[str]:
    from vllm.config.cache import CacheDType

    return [str(v) for v in typing.get_args(CacheDType)]


@contextlib.contextmanager
def rocm_arch(arch: str) -> Iterator[Any]:
    """vllm.platforms.rocm as if its GPU were ``arch``: the module-level ``_ON_*`` flags are
    recomputed by running vLLM's own assignments with ``_GCN_ARCH = arch``."""
    _amdsmi_stand_in()
    import vllm.platforms.rocm as rocm

    tree = ast.parse(inspect.getsource(rocm))
    flags = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and all(isinstance(t, ast.Name) and t.id.startswith("_ON_") for t in node.targets)
    ]
    saved = {name: getattr(rocm, name) for name in vars(rocm) if name.startswith("_ON_")}
    saved["_GCN_ARCH"] = rocm._GCN_ARCH
    try:
        rocm._GCN_ARCH = arch
        code = compile(ast.Module(body=flags, type_ignores=[]), rocm.__file__, "exec")
        exec(code, vars(rocm))
        major, minor = rocm._capability_from_gcn_arch(arch) or (9, 4)
        from vllm.platforms.interface import DeviceCapability

        yield DeviceCapability(major, minor)
    finally:
        for name, value in saved.items():
            setattr(rocm, name, value)


def _answer(fn: Any, *args: Any) -> bool | None:
    if fn is None:  # a predicate this release does not have: it does not ask
        return None
    try:
        return bool(fn(*args))
    except Exception:  # a predicate that needs a GPU or a kernel library: not known here
        return None


def _subset(fn: Any, probes: Any) -> list[Any] | str:
    """The probes ``fn`` accepts; "any" when it accepts every one (or the release has no
    such predicate: then it refuses none)."""
    if fn is None:
        return "any"
    ok = [p for p in probes if _answer(fn, p)]
    return "any" if len(ok) == len(list(probes)) else ok


def _backend(cls: Any, heads: tuple[int, ...], kv: list[str], blocks: tuple[int, ...]) -> dict:
    from vllm.platforms.interface import DeviceCapability

    def has(name: str) -> Any:
        return getattr(cls, name, None)  # older releases lack some (0.19: sliding window)

    attn_type = has("supports_attn_type")
    entry: dict[str, Any] = {
        "head_sizes": _subset(has("supports_head_size"), heads),
        "kv_cache_dtypes": _subset(has("supports_kv_cache_dtype"), kv),
        "block_sizes": _subset(has("supports_block_size"), blocks),
        "mla": _answer(has("is_mla")),
        "sparse": _answer(has("is_sparse")),
        "sink": _answer(has("supports_sink")),
        "sliding_window": _answer(has("supports_sliding_window")),
        "kv_connector": _answer(has("supports_kv_connector")),
        "attn_types": (
            [t for t in ATTN_TYPES if _answer(attn_type, t)] if attn_type else list(ATTN_TYPES)
        ),
    }
    rocm: dict[str, bool | None] = {}
    for arch in ROCM_ARCHS:
        with rocm_arch(arch) as cap:
            rocm[arch] = _answer(has("supports_compute_capability"), cap)
    entry["rocm_archs"] = rocm
    entry["cuda_capabilities"] = {
        f"{major}.{minor}": _answer(
            has("supports_compute_capability"), DeviceCapability(major, minor)
        )
        for major, minor in CUDA_CAPS
    }
    return entry


def _reason(exc: BaseException) -> str:
    """Why a backend could not be read, without this machine's paths (the table is shipped)."""
    text = re.sub(r"\s*\((?:/|[A-Za-z]:\\)[^)]*\)", "", f"{type(exc).__name__}: {exc}")
    return re.sub(r"(?:/[^\s'\"]+)+", "<path>", text)[:160]


def _static_kv_dtypes(path: str) -> dict[str, Any]:
    """``supported_kv_cache_dtypes`` read from the class's source when it cannot be imported
    here (a literal list on the class itself; nothing when it is computed or inherited)."""
    import vllm

    module, _, name = path.rpartition(".")
    # The file found from the package's own folder, not by importing the module's parents
    # (0.24-0.26's compilation passes call compiled ops at import).
    root = pathlib.Path(vllm.__file__).parent.parent
    try:
        tree = ast.parse((root / (module.replace(".", "/") + ".py")).read_text())
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                target = getattr(item, "target", None)
                if isinstance(target, ast.Name) and target.id == "supported_kv_cache_dtypes":
                    try:
                        return {"kv_cache_dtypes": list(ast.literal_eval(item.value))}  # type: ignore[attr-defined]
                    except ValueError:
                        return {}
    return {}


def _head_probes(classes: list[Any]) -> tuple[int, ...]:
    named: set[int] = set(HEAD_PROBES)
    for cls in classes:
        with contextlib.suppress(Exception):
            named.update(int(h) for h in cls.get_supported_head_sizes())
    return tuple(sorted(named))


def attention_table(block_choices: list[int] | None = None) -> dict[str, Any]:
    """The values each backend accepts (over ``probes``) and ROCm's priority lists."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    _amdsmi_stand_in()
    classes: dict[str, Any] = {}
    out: dict[str, Any] = {}
    for member in AttentionBackendEnum:
        try:
            classes[member.name] = member.get_class()
        except Exception as exc:
            out[member.name] = {"unreadable": _reason(exc), **_static_kv_dtypes(str(member.value))}
    heads = _head_probes(list(classes.values()))
    blocks = tuple(sorted({*BLOCK_PROBES, *(block_choices or [])}))
    kv = _kv_dtypes()
    for name, cls in classes.items():
        try:
            out[name] = _backend(cls, heads, kv, blocks)
        except Exception as exc:
            out[name] = {"unreadable": _reason(exc)}
    found = dict(sorted(out.items()))
    return {
        "probes": {"head_sizes": list(heads), "block_sizes": list(blocks), "kv_cache_dtypes": kv},
        "backends": found,
        "rocm_priorities": rocm_priorities(),
        "cuda_priorities": cuda_priorities(heads, kv),
        "kv_bytes": kv_bytes(found),
    }


def rocm_priorities() -> list[dict[str, Any]]:
    """ROCm's backend order for each MLA/sparse/KV-connector case and AITER switch state.

    ``_get_backend_priorities`` asks ``rocm_aiter_ops`` whether AITER MHA / MLA are enabled
    and whether AITER is found and supported; each answer is set in turn.
    """
    _amdsmi_stand_in()
    import vllm.platforms.rocm as rocm
    from vllm import _aiter_ops

    ops = _aiter_ops.rocm_aiter_ops
    names = ("is_mha_enabled", "is_mla_enabled", "is_rdna_aiter_enabled")  # RDNA from 0.28
    saved = {n: getattr(ops, n) for n in names if hasattr(ops, n)}
    saved_found = _aiter_ops.is_aiter_found_and_supported
    params = inspect.signature(rocm._get_backend_priorities).parameters
    rows = []
    try:
        for mla, sparse, conn, mha, aiter_mla, found in itertools.product((False, True), repeat=6):
            ops.is_mha_enabled = lambda v=mha: v
            ops.is_mla_enabled = lambda v=aiter_mla: v
            if "is_rdna_aiter_enabled" in saved:
                ops.is_rdna_aiter_enabled = lambda: False
            _aiter_ops.is_aiter_found_and_supported = lambda v=found: v
            kwargs = {"use_kv_connector": conn} if "use_kv_connector" in params else {}
            order = rocm._get_backend_priorities(mla, sparse, **kwargs)
            when = {"mla": mla, "sparse": sparse, "kv_connector": conn}
            when |= {"aiter_mha": mha, "aiter_mla": aiter_mla, "aiter_supported": found}
            rows.append({"when": when, "order": [b.name for b in order]})
    finally:
        for n, fn in saved.items():
            setattr(ops, n, fn)
        _aiter_ops.is_aiter_found_and_supported = saved_found
    return rows


KV_HEAD_PROBES = (64, 96, 128, 256)


def kv_bytes(backends: dict[str, Any]) -> dict[str, Any]:
    """Bytes one token's K and V take per KV head, for each ``--kv-cache-dtype``.

    Built as vLLM builds a decoder layer's page (``Attention.get_kv_cache_spec``: the dtype
    from ``kv_cache_dtype_str_to_dtype``, the quant mode from ``get_kv_quant_mode``, then the
    backend's ``customize_spec`` packing — TurboQuant's packed slots, per-token-head scales),
    with the first readable backend that takes the dtype and the head size. "auto" is the
    model's dtype and is not listed; a dtype no readable backend takes is left out.
    """
    import types

    import torch
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1 import kv_cache_interface
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    # Quant modes (per-token-head scales) and customize_spec packing exist from 0.2x on; an
    # older release builds the plain page.
    quant_mode = getattr(kv_cache_interface, "get_kv_quant_mode", None)

    model = types.SimpleNamespace(dtype=torch.bfloat16)
    out: dict[str, Any] = {}
    for kv in _kv_dtypes():
        if kv == "auto":
            continue
        sizes: dict[str, float] = {}
        used = None
        for head in KV_HEAD_PROBES:
            for name, entry in backends.items():
                if "unreadable" in entry or entry.get("mla"):
                    continue
                takes_kv = entry["kv_cache_dtypes"] == "any" or kv in entry["kv_cache_dtypes"]
                takes_head = entry["head_sizes"] == "any" or head in entry["head_sizes"]
                if not (takes_kv and takes_head):
                    continue
                try:
                    cls = AttentionBackendEnum[name].get_class()
                    extra = {"kv_quant_mode": quant_mode(kv)} if quant_mode else {}
                    spec = FullAttentionSpec(
                        block_size=16,
                        num_kv_heads=1,
                        head_size=head,
                        head_size_v=head,
                        dtype=kv_cache_dtype_str_to_dtype(kv, model),
                        **extra,
                    )
                    if hasattr(cls, "customize_spec"):
                        spec = cls.customize_spec(spec)
                    sizes[str(head)] = spec.real_page_size_bytes / 16
                    used = used or name
                    break
                except Exception:  # this backend cannot pack it: try the next
                    continue
        if sizes:
            out[kv] = {"bytes_per_token_per_kv_head": sizes, "packed_by": used}
    return out
