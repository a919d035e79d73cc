"""The facts vLLM's attention selector reads, taken from a rules context, and its ROCm pick.

Kept apart from the rules (:mod:`tuner.rules.backends`) so the context itself
(:meth:`tuner.rules.base.Context.effective_backend`) predicts the backend with the same walk
without an import circle. ``ctx`` is a :class:`tuner.rules.base.Context`.
"""

from __future__ import annotations

from typing import Any, Protocol

from tuner.model.info import ModelInfo
from tuner.rules.types import Target
from tuner.vllm_tables import exact
from tuner.vllm_tables.attention import AttentionTable, LayerFacts


class Context(Protocol):
    """What these functions read of :class:`tuner.rules.base.Context` (which imports this
    module: a protocol keeps the import one way)."""

    model: ModelInfo | None
    target: Target

    @property
    def rocm(self) -> bool: ...

    @property
    def cuda(self) -> bool: ...

    @property
    def aiter_on(self) -> bool: ...

    def flag(self, key: str, default: bool | None = None) -> bool: ...

    def is_set(self, key: str) -> bool: ...

    def int_value(self, key: str, default: int | None = None) -> int | None: ...

    def value(self, key: str, default: Any = None) -> Any: ...


BACKEND_KEYS = ("attention-backend", "VLLM_ATTENTION_BACKEND")


def attention_table(ctx: Context) -> AttentionTable | None:
    """The target release's attention table (None: no table for that release line)."""
    found = exact(ctx.target.vllm_version)
    return found.attention if found is not None else None


def layer_facts(ctx: Context) -> LayerFacts | None:
    """What vLLM's selector sees for this model and config (None without a model)."""
    model = ctx.model
    if model is None:
        return None
    head = model.head_dim
    if model.is_mla and model.kv_lora_rank and model.qk_rope_head_dim is not None:
        head = model.kv_lora_rank + model.qk_rope_head_dim  # vLLM's MLA head size (576)
    kv = str(ctx.value("kv-cache-dtype") or "auto").strip().lower()
    encoder_decoder = bool(model.config.get("is_encoder_decoder"))
    return LayerFacts(
        head_size=head or None,
        kv_cache_dtype=kv,
        block_size=ctx.int_value("block-size") if ctx.is_set("block-size") else None,
        mla=model.is_mla,
        sparse=model.is_sparse_attention,
        sink=model.has_sinks,
        attn_type="encoder_decoder" if encoder_decoder else "decoder",
        arch=(ctx.target.gpu_arch or None) if ctx.rocm else None,
        kv_connector=ctx.is_set("kv-transfer-config"),
        cuda_capability=cuda_capability(ctx.target.gpu_arch) if ctx.cuda else None,
        num_heads=model.num_heads or None,
    )


def cuda_capability(arch: str | None) -> str | None:
    """A GPU table architecture ("sm_90", "sm_100") as vLLM writes a capability ("9.0", "10.0")."""
    if not arch or not arch.startswith("sm_") or not arch[3:].isdigit():
        return None
    number = int(arch[3:])
    return f"{number // 10}.{number % 10}"


def rocm_pick(
    ctx: Context, table: AttentionTable, facts: LayerFacts
) -> tuple[str | None, dict[str, list[str]]]:
    """vLLM's ROCm selection for this config: (backend or None, reasons for those passed)."""
    # AITER's kernels need CDNA3 or newer (is_aiter_found_and_supported); the AITER FA
    # backend's own architecture check is the same test, so the table answers it.
    supported = True
    if facts.arch:
        supported = (
            table.backends.get("ROCM_AITER_FA", {}).get("rocm_archs", {}).get(facts.arch, True)
        )
    on = ctx.aiter_on and bool(supported)
    return table.rocm_choice(
        facts,
        aiter_mha=on and ctx.flag("VLLM_ROCM_USE_AITER_MHA", True),
        aiter_mla=on and ctx.flag("VLLM_ROCM_USE_AITER_MLA", True),
        aiter_supported=bool(supported),
    )
