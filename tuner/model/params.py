"""Parameter counts from a config alone, for when no weights metadata can be read.

Offline and without the checkpoint, the only way to size a model is to add up
its tensors from the architecture: embeddings, attention (MLA's low-rank
projections included), dense MLPs or experts, norms, and the LM head unless it
is tied. The families covered are the ones the reference docs name (Llama,
Qwen2/3, Mixtral, DeepSeek-V2/V3, gpt-oss); others fall back to the Llama shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tuner.model.moe import MoEInfo, moe_layer_indices


@dataclass(frozen=True)
class ParamEstimate:
    """Parameters by part; ``total`` is what model cards publish.

    Attributes:
        total: All parameters (multi-token-prediction layers excluded, as model cards do).
        active: Parameters one token uses (routed experts beyond top-k left out).
        attention_linear: Attention projection weights over all layers.
        mlp_linear: Dense MLP, shared and routed expert projection weights.
        routed_experts: Routed expert weights (projections and their biases): the
            part expert parallelism shards across ranks; the rest is replicated.
    """

    total: int
    active: int
    attention_linear: int
    mlp_linear: int
    routed_experts: int = 0

    @property
    def quantizable(self) -> int:
        """Weights a checkpoint quantizer converts (linear layers inside decoder layers)."""
        return self.attention_linear + self.mlp_linear


def _i(cfg: dict[str, Any], key: str, default: int = 0) -> int:
    value = cfg.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _attention(cfg: dict[str, Any]) -> tuple[int, int]:
    """(linear weights, other tensors) of one attention block."""
    hidden = _i(cfg, "hidden_size")
    heads = _i(cfg, "num_attention_heads")
    model_type = str(cfg.get("model_type") or "")
    if cfg.get("kv_lora_rank"):
        kv_lora = _i(cfg, "kv_lora_rank")
        rope = _i(cfg, "qk_rope_head_dim")
        nope = _i(cfg, "qk_nope_head_dim")
        v_dim = _i(cfg, "v_head_dim", nope)
        q_lora = _i(cfg, "q_lora_rank")
        q_head = nope + rope
        if q_lora:
            linear = hidden * q_lora + q_lora * heads * q_head
            other = q_lora  # q_a_layernorm
        else:
            linear = hidden * heads * q_head
            other = 0
        linear += (
            hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
        )
        other += kv_lora  # kv_a_layernorm
        return linear, other
    kv_heads = _i(cfg, "num_key_value_heads", heads)
    head_dim = _i(cfg, "head_dim") or hidden // heads
    q_out = heads * head_dim
    kv_out = kv_heads * head_dim
    linear = hidden * q_out + 2 * hidden * kv_out + q_out * hidden
    other = 0
    if cfg.get("attention_bias") or model_type in {"qwen2", "qwen2_moe"}:
        other += q_out + 2 * kv_out  # q/k/v biases
        if cfg.get("attention_bias"):
            other += hidden  # o_proj bias (gpt-oss)
    if model_type in {"qwen3", "qwen3_moe"}:
        other += 2 * head_dim  # q_norm, k_norm
    if model_type == "gpt_oss":
        other += heads  # attention sinks
    return linear, other


def _expert_size(cfg: dict[str, Any]) -> int:
    """Intermediate size of one routed expert."""
    return _i(cfg, "moe_intermediate_size") or _i(cfg, "intermediate_size")


def estimate_params(cfg: dict[str, Any], moe: MoEInfo | None) -> ParamEstimate:
    """Adds up the tensors the architecture implies (see module docstring).

    Args:
        cfg: The (text) config dict.
        moe: The MoE shape from the same config, None for dense models.
    """
    layers = _i(cfg, "num_hidden_layers")
    hidden = _i(cfg, "hidden_size")
    vocab = _i(cfg, "vocab_size")
    # Llama 4 names its dense MLP width intermediate_size_mlp; intermediate_size
    # is the expert width there (vLLM llama4.py lines 100 and 352).
    inter = _i(cfg, "intermediate_size_mlp") or _i(cfg, "intermediate_size")
    gpt_oss = cfg.get("model_type") == "gpt_oss"
    embed = vocab * hidden
    lm_head = 0 if cfg.get("tie_word_embeddings") else vocab * hidden
    attn_linear, attn_other = _attention(cfg)
    norms_per_layer = 2 * hidden
    dense_mlp = 3 * hidden * inter
    moe_idx = set(moe_layer_indices(cfg, layers)) if moe else set()

    total_attn_linear = layers * attn_linear
    mlp_linear = 0
    other = embed + lm_head + hidden + layers * (attn_other + norms_per_layer)
    inactive = 0
    routed = 0
    for layer in range(layers):
        if layer not in moe_idx or moe is None:
            mlp_linear += dense_mlp
            continue
        e_inter = _expert_size(cfg)
        per_expert = 3 * hidden * e_inter
        if gpt_oss:
            per_expert_bias = 2 * e_inter + hidden
            other += moe.num_experts * per_expert_bias + moe.num_experts  # + router bias
            inactive += (moe.num_experts - moe.experts_per_token) * per_expert_bias
            routed += moe.num_experts * per_expert_bias
        mlp_linear += moe.num_experts * per_expert
        routed += moe.num_experts * per_expert
        other += hidden * moe.num_experts  # router
        inactive += (moe.num_experts - moe.experts_per_token) * per_expert
        shared_inter = _i(cfg, "shared_expert_intermediate_size")
        if shared_inter:
            mlp_linear += 3 * hidden * shared_inter
            other += hidden  # shared_expert_gate
        elif moe.shared_experts:
            mlp_linear += moe.shared_experts * per_expert
    total = other + total_attn_linear + mlp_linear
    return ParamEstimate(
        total=total,
        active=total - inactive,
        attention_linear=total_attn_linear,
        mlp_linear=mlp_linear,
        routed_experts=routed,
    )


_QUARK_BITS: dict[str, float] = {
    "fp8": 8,
    "int8": 8,
    "uint8": 8,
    "int4": 4,
    "uint4": 4,
    "fp4": 4.25,
    "mx": 4.25,
}


def quantized_bits(qcfg: dict[str, Any], dtype: str) -> float | None:
    """Storage bits per quantized weight for a ``quantization_config``, None if unknown.

    Group-wise integer formats carry a 16-bit scale and a zero point per group;
    MXFP4 carries an 8-bit scale per 32 values (4.25 bits).
    """
    method = str(qcfg.get("quant_method") or "").lower()
    if method in {"fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "experts_int8"}:
        return 8
    if method == "modelopt_mxfp8":
        return 8.25  # e4m3 weights and an 8-bit scale per 32 values
    if method in {"mxfp4", "modelopt_fp4"}:
        return 4.25
    if method in {"awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "auto_round"}:
        bits = _i(qcfg, "bits") or _i(qcfg, "w_bit") or 4
        group = _i(qcfg, "group_size") or _i(qcfg, "q_group_size") or 128
        group = group if group > 0 else 4096
        return bits + (16 + bits) / group
    if method == "bitsandbytes":
        return 4.5 if qcfg.get("load_in_4bit") else 8
    if method == "compressed-tensors":
        for group in (qcfg.get("config_groups") or {}).values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and weights.get("num_bits"):
                return float(weights["num_bits"])
        return 8
    if method == "quark":
        weight = (qcfg.get("global_quant_config") or {}).get("weight") or {}
        if isinstance(weight, list):
            weight = weight[0] if weight else {}
        name = str(weight.get("dtype") or "").lower()
        for prefix, quark_bits in _QUARK_BITS.items():
            if name.startswith(prefix):
                return quark_bits
        return 8
    if re.fullmatch(r"w?(\d+)a\d+", method):
        return float(re.findall(r"\d+", method)[0])
    return None
