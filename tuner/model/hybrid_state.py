"""A hybrid model's per-request recurrent state: what its non-attention layers keep (issue 27).

Hybrid models (Qwen3-Next / Qwen3.5's Gated DeltaNet, Nemotron-H's Mamba-2)
keep a KV cache only in their attention layers (tuner.model.info counts those
per token); every other layer keeps a fixed-size state per request — a
convolution window and a recurrent matrix — whatever the request's length.
vLLM sizes it with ``MambaStateShapeCalculator`` (model_executor/layers/
mamba/mamba_utils.py) from the model's config, at the model's dtype unless
``--mamba-cache-dtype`` / ``--mamba-ssm-cache-dtype`` say otherwise. The
element counts here are that calculator's at TP 1 with no speculative tokens,
and ``tests/test_model_info.py`` holds them to the installed vLLM's own
calculator, so a change in vLLM fails a test instead of going unseen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _int(cfg: Mapping[str, Any], key: str) -> int:
    value = cfg.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def gated_delta_net_elements(cfg: Mapping[str, Any]) -> int:
    """One Gated DeltaNet layer's state (Qwen3-Next naming): conv window + recurrent matrix."""
    nk, nv = _int(cfg, "linear_num_key_heads"), _int(cfg, "linear_num_value_heads")
    dk, dv = _int(cfg, "linear_key_head_dim"), _int(cfg, "linear_value_head_dim")
    kernel = _int(cfg, "linear_conv_kernel_dim")
    if not (nk and nv and dk and dv and kernel):
        return 0
    conv = (dk * nk * 2 + dv * nv) * (kernel - 1)
    return conv + nv * dv * dk


def mamba2_elements(cfg: Mapping[str, Any]) -> int:
    """One Mamba-2 layer's state (Nemotron-H naming): conv window + SSM state."""
    heads, head_dim = _int(cfg, "mamba_num_heads"), _int(cfg, "mamba_head_dim")
    state, groups = _int(cfg, "ssm_state_size"), _int(cfg, "n_groups")
    kernel = _int(cfg, "conv_kernel")
    if not (heads and head_dim and state and kernel):
        return 0
    inner = heads * head_dim
    conv = (inner + 2 * groups * state) * (kernel - 1)
    return conv + heads * head_dim * state


def elements_per_layer(cfg: Mapping[str, Any]) -> int:
    """The state elements of one non-attention layer of ``cfg``'s family; 0 if unknown."""
    return gated_delta_net_elements(cfg) or mamba2_elements(cfg)
