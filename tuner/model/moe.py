"""Mixture-of-experts shape from a config: experts, top-k, shared experts, which layers.

Kept apart from :mod:`tuner.model.info` so the parameter estimate
(:mod:`tuner.model.params`) and the model facts can both use it without
importing each other. Every family spells the keys differently; the per-family
names live only here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# model_type values whose MoE layers carry one always-on shared expert the
# config does not count (vLLM model_executor/models/llama4.py Llama4MoE:
# ``self.n_shared_experts: int = 1``, its size is ``intermediate_size``).
_ONE_SHARED_EXPERT = {"llama4", "llama4_text"}


@dataclass(frozen=True)
class MoEInfo:
    """Mixture-of-experts shape.

    Attributes:
        num_experts: Routed experts per MoE layer.
        experts_per_token: Routed experts each token activates.
        shared_experts: Always-on experts per MoE layer (DeepSeek, Qwen2-MoE, Llama 4).
        moe_layers: How many decoder layers are MoE layers.
    """

    num_experts: int
    experts_per_token: int
    shared_experts: int = 0
    moe_layers: int = 0

    @property
    def activation_density(self) -> float:
        """Share of routed experts a token uses (reference 001 §Parallelism strategies)."""
        return self.experts_per_token / self.num_experts if self.num_experts else 0.0


def first_int(cfg: dict[str, Any], *keys: str) -> int | None:
    """The first of ``keys`` that holds an integer (bools are not integers here)."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def moe_from_config(cfg: dict[str, Any], num_layers: int) -> MoEInfo | None:
    """The MoE shape, or None for a dense model (per-family key names handled here)."""
    experts = first_int(
        cfg, "n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts"
    )
    per_tok = first_int(
        cfg, "num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token"
    )
    if not experts or experts <= 1 or not per_tok:
        return None
    shared = first_int(cfg, "n_shared_experts") or 0
    if not shared and (cfg.get("shared_expert_intermediate_size") or 0) > 0:
        shared = 1
    if not shared and str(cfg.get("model_type") or "") in _ONE_SHARED_EXPERT:
        shared = 1
    return MoEInfo(experts, per_tok, shared, len(moe_layer_indices(cfg, num_layers)))


def moe_layer_indices(cfg: dict[str, Any], num_layers: int) -> list[int]:
    """Which decoder layers hold experts.

    DeepSeek: a dense prefix (``first_k_dense_replace``) and ``moe_layer_freq``;
    Qwen-MoE: ``decoder_sparse_step`` and ``mlp_only_layers``; Llama 4:
    ``interleave_moe_layer_step`` (vLLM llama4.py line 341: layer i is MoE when
    ``(i + 1) % step == 0``; Maverick uses 2, so half its layers are dense) or
    an explicit ``moe_layers`` list.
    """
    if isinstance(cfg.get("moe_layers"), list):
        return sorted(int(i) for i in cfg["moe_layers"] if 0 <= int(i) < num_layers)
    if "interleave_moe_layer_step" in cfg:
        step = int(cfg.get("interleave_moe_layer_step") or 0)
        return [i for i in range(num_layers) if step > 0 and (i + 1) % step == 0]
    if "first_k_dense_replace" in cfg or "moe_layer_freq" in cfg:
        first = int(cfg.get("first_k_dense_replace") or 0)
        freq = int(cfg.get("moe_layer_freq") or 1)
        return [i for i in range(num_layers) if i >= first and i % freq == 0]
    if "decoder_sparse_step" in cfg or "mlp_only_layers" in cfg:
        step = int(cfg.get("decoder_sparse_step") or 1)
        dense = set(cfg.get("mlp_only_layers") or [])
        return [i for i in range(num_layers) if i not in dense and (i + 1) % step == 0]
    return list(range(num_layers))
