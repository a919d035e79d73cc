"""What tunelab knows about a model, read from its ``config.json``.

The rules and the fit estimate need a handful of architecture facts (attention
kind, MoE shape, KV-cache size per token, weight bytes) that every published
config spells a little differently. This module turns one config dict into a
:class:`ModelInfo`, so nothing else has to know the per-family key names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from tuner.model import encoder_decoder, hybrid_state
from tuner.model.config_check import SIZE_BOUNDS, ModelError, check_config, normalized
from tuner.model.moe import MoEInfo, first_int, moe_from_config
from tuner.model.params import ParamEstimate, estimate_params, quantized_bits

# ModelError and SIZE_BOUNDS live in tuner.model.config_check; named here as before.
__all__ = [
    "DTYPE_BYTES",
    "SIZE_BOUNDS",
    "AttentionKind",
    "ModelError",
    "ModelInfo",
    "from_config",
    "kv_element_bytes",
    "kv_scales_static",
    "text_config",
]

# Bytes per element for the dtypes configs name.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float8_e4m3fn": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2": 1,
    "fp8": 1,
}


class AttentionKind(StrEnum):
    """How the KV cache is shaped (decides backends and KV bytes per token)."""

    MHA = "MHA"  # as many KV heads as query heads
    GQA = "GQA"  # fewer KV heads than query heads, more than one
    MQA = "MQA"  # one KV head
    MLA = "MLA"  # multi-head latent attention (DeepSeek): a compressed latent per token


@dataclass
class ModelInfo:
    """Architecture facts, sizes and where they came from.

    Attributes:
        name: The model id or path as given.
        source: Where the config was found: local-dir, config-file, hf-cache or hub.
        path: Directory holding the config (None for the hub).
        architecture: First entry of ``architectures`` (e.g. LlamaForCausalLM).
        model_type: The config's ``model_type``.
        attention: MHA / GQA / MQA / MLA.
        num_layers: Decoder layers.
        hidden_size: Model width.
        num_heads: Query heads.
        num_kv_heads: KV heads (equal to ``num_heads`` for MHA and MLA).
        head_dim: Per-head size (qk_nope + qk_rope for MLA).
        kv_lora_rank: MLA latent size, None otherwise.
        qk_rope_head_dim: MLA decoupled rope size, None otherwise.
        vocab_size: Vocabulary.
        max_position_embeddings: Longest context the config declares.
        moe: MoE shape, None for dense models.
        is_gpt_oss: gpt-oss family (attention sinks; AITER unified attention advised).
        sliding_window: Window size when some or all layers use it, else None.
        quant_method: ``quantization_config.quant_method`` of a pre-quantized model.
        kv_scales_static: The checkpoint carries calibrated FP8 KV-cache scales.
        dtype: Declared weight dtype (``torch_dtype`` / ``dtype``), default bfloat16.
        param_count: Parameters (logical, as published: quantized packing undone).
        active_param_count: Parameters a token uses (MoE); equal to param_count if dense.
        weight_bytes: Bytes of the weights as stored.
        weights_source: How weight_bytes was found: safetensors, index, hub-metadata, config-estimate.
        params_source: How param_count was found: safetensors, hub-metadata, config-estimate.
        routed_expert_share: Share of weight_bytes in routed experts (config estimate):
            what expert parallelism shards across ranks; 0 for dense models.
        kv_layers: Layers that keep a KV cache (hybrids); None: every layer.
        encoder_positions: An encoder-decoder's encoder positions per request
            (Whisper: 1500), whose cross-attention K/V the decoder keeps; 0 otherwise.
        recurrent_state_elements: A hybrid's per-request state over its
            non-attention layers (tuner.model.hybrid_state), in elements; 0 otherwise.
        notes: Anything the user should know about these figures.
        config: The raw config dict.
    """

    name: str
    source: str
    path: Path | None
    architecture: str | None
    model_type: str | None
    attention: AttentionKind
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    vocab_size: int
    max_position_embeddings: int | None
    moe: MoEInfo | None
    is_gpt_oss: bool
    sliding_window: int | None
    quant_method: str | None
    kv_scales_static: bool
    dtype: str
    param_count: int
    active_param_count: int
    weight_bytes: int
    weights_source: str
    params_source: str
    routed_expert_share: float = 0.0
    kv_layers: int | None = None  # layers that keep a KV cache; None: every layer
    encoder_positions: int = 0  # encoder-decoder: encoder positions a request fills
    recurrent_state_elements: int = 0  # hybrids: the non-attention layers' state per request
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def short_name(self) -> str:
        """A name for messages: the id for hub models, the directory or file stem for paths."""
        if self.source in {"hub", "hf-cache"}:
            return self.name
        path = Path(self.name)
        if path.name == "config.json":
            path = path.parent
        return path.stem if path.suffix == ".json" else (path.name or self.name)

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention models (DeepSeek-V2/V3/R1, Kimi)."""
        return self.attention is AttentionKind.MLA

    @property
    def has_sinks(self) -> bool:
        """Attention sinks (gpt-oss): vLLM's ROCM_ATTN cannot take them (rocm_attn.py supports_sink)."""
        return self.is_gpt_oss

    @property
    def is_sparse_attention(self) -> bool:
        """DeepSeek sparse attention (DSA: DeepSeek-V3.2): an indexer picks the attended tokens.

        Read from the config's indexer keys (``index_topk``) or model_type
        ``deepseek_v32``; vLLM routes such models to ROCM_AITER_MLA_SPARSE on
        ROCm (platforms/rocm.py _get_backend_priorities, ``use_sparse``).
        """
        cfg = text_config(self.config) if self.config else {}
        return bool(cfg.get("index_topk")) or self.model_type == "deepseek_v32"

    @property
    def is_multimodal(self) -> bool:
        """A vision-language model (its config nests a vision encoder config)."""
        return isinstance(self.config.get("vision_config"), dict) if self.config else False

    @property
    def is_encoder_decoder(self) -> bool:
        """An encoder-decoder model (Whisper): vLLM's ENCODER_DECODER attention type."""
        return self.encoder_positions > 0 or bool(self.config.get("is_encoder_decoder"))

    def request_state_bytes(self, kv_cache_dtype: str | None = "auto") -> int:
        """Cache bytes one request holds whatever its length, on one replica: the sum of
        :meth:`cross_attention_bytes` and :meth:`recurrent_state_bytes`."""
        return self.cross_attention_bytes(kv_cache_dtype) + self.recurrent_state_bytes()

    def cross_attention_bytes(self, kv_cache_dtype: str | None = "auto") -> int:
        """An encoder-decoder's cross-attention per request: K and V of every encoder
        position in every decoder layer (vLLM sizes that ``CrossAttentionSpec`` by the
        encoder's input length), at the KV-cache dtype; 0 for other models."""
        if not self.encoder_positions:
            return 0
        elem = kv_element_bytes(kv_cache_dtype, self.dtype)
        per_position = 2 * self.num_layers * self.num_kv_heads * self.head_dim * elem
        return int(per_position * self.encoder_positions)

    def recurrent_state_bytes(self) -> int:
        """A hybrid's conv and recurrent state per request, at the model's dtype (vLLM's
        ``--mamba-cache-dtype auto``); 0 for other models."""
        return int(self.recurrent_state_elements * self.dtype_bytes)

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models."""
        return self.moe is not None

    @property
    def is_prequantized(self) -> bool:
        """True when the checkpoint itself is quantized (its config says how)."""
        return self.quant_method is not None

    @property
    def dtype_bytes(self) -> float:
        """Bytes per element of the declared dtype (2 when unknown)."""
        return DTYPE_BYTES.get(self.dtype.lower(), 2)

    def kv_bytes_per_token(self, kv_cache_dtype: str | None = "auto") -> int:
        """KV-cache bytes one token takes across all layers, on one replica.

        GQA/MHA/MQA: 2 (K and V) × layers × kv_heads × head_dim × bytes.
        MLA: layers × (kv_lora_rank + qk_rope_head_dim) × bytes (one latent, no V).
        ``kv_cache_dtype`` fp8* stores 1 byte per element; auto uses the model dtype
        (reference 000 §FP8 kv-cache dtype). 004_c4561cd56ddb4be5.txt §5 writes
        2 × layers × hidden_dim × bytes with hidden_dim = n_heads × d_head, i.e.
        all query heads: right for MHA (its Llama-2-7B example) but several times
        too large for GQA/MQA and wrong for MLA. The formula here counts KV
        heads (and MLA's latent), as vLLM allocates it; it differs from 004's on
        purpose.
        """
        elem = kv_element_bytes(kv_cache_dtype, self.dtype)
        layers = self.kv_layers or self.num_layers  # hybrids: the attention layers only
        packed = None if self.is_mla else _packed_kv_bytes(kv_cache_dtype, self.head_dim)
        if packed is not None:  # vLLM's own packing of this dtype (issue 27: turboquant, ...)
            return int(layers * self.num_kv_heads * packed)
        if self.is_mla:
            latent = (self.kv_lora_rank or 0) + (self.qk_rope_head_dim or 0)
            return int(layers * latent * elem)
        return int(2 * layers * self.num_kv_heads * self.head_dim * elem)

    def summary(self) -> dict[str, Any]:
        """A JSON-able digest for ``--json`` outputs and the TUI."""
        return {
            "name": self.name,
            "source": self.source,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "attention": str(self.attention),
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "moe": None
            if self.moe is None
            else {
                "num_experts": self.moe.num_experts,
                "experts_per_token": self.moe.experts_per_token,
                "shared_experts": self.moe.shared_experts,
                "activation_density": round(self.moe.activation_density, 5),
            },
            "is_gpt_oss": self.is_gpt_oss,
            "sliding_window": self.sliding_window,
            "quant_method": self.quant_method,
            "kv_scales_static": self.kv_scales_static,
            "dtype": self.dtype,
            "param_count": self.param_count,
            "active_param_count": self.active_param_count,
            "weight_bytes": self.weight_bytes,
            "weights_source": self.weights_source,
            "routed_expert_share": round(self.routed_expert_share, 4),
            "kv_layers": self.kv_layers,
            "kv_bytes_per_token": self.kv_bytes_per_token(),
            "encoder_positions": self.encoder_positions,
            "request_state_bytes": self.request_state_bytes(),
            "recurrent_state_bytes": self.recurrent_state_bytes(),
            "notes": list(self.notes),
        }


def _packed_kv_bytes(kv_cache_dtype: str | None, head_dim: int) -> float | None:
    """Bytes per token per KV head for a ``--kv-cache-dtype`` as the installed release's table
    says vLLM packs it (tuner.vllm_tables); None for "auto" or a dtype it does not list."""
    kv = (kv_cache_dtype or "auto").lower()
    if kv == "auto":
        return None
    from tuner.vllm_tables import table  # one JSON file, read on first use

    att = table().attention
    return att.kv_bytes_per_head(kv, head_dim) if att is not None else None


def kv_element_bytes(kv_cache_dtype: str | None, model_dtype: str) -> float:
    """Bytes per KV element for vLLM's ``--kv-cache-dtype`` value."""
    kv = (kv_cache_dtype or "auto").lower()
    if kv.startswith("fp8") or kv in {"int8", "uint8"}:
        return 1
    if kv == "auto":
        return DTYPE_BYTES.get(model_dtype.lower(), 2)
    return DTYPE_BYTES.get(kv, 2)


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config (multimodal configs nest it)."""
    inner = cfg.get("text_config")
    if isinstance(inner, dict) and "num_hidden_layers" in inner:
        merged = dict(inner)
        for key in ("architectures", "quantization_config", "torch_dtype", "dtype"):
            if key in cfg and key not in merged:
                merged[key] = cfg[key]
        return merged
    return cfg


def kv_scales_static(qcfg: dict[str, Any]) -> bool:
    """True when a quantization config carries calibrated (static) KV-cache scales.

    llm-compressor writes ``kv_cache_scheme`` ("static", or a dict with
    ``dynamic: false``); AMD Quark lists ``kv_cache_group`` and gives the
    k/v projections static fp8 output tensors (reference 000 §FP8 kv-cache dtype).
    """
    scheme = qcfg.get("kv_cache_scheme")
    if isinstance(scheme, str):
        return scheme.lower() == "static"
    if isinstance(scheme, dict):
        return not scheme.get("dynamic", False)
    if qcfg.get("kv_cache_group"):
        return True
    layers = qcfg.get("layer_quant_config")
    if isinstance(layers, dict):
        for pattern, spec in layers.items():
            out = spec.get("output_tensors") if isinstance(spec, dict) else None
            kv_proj = "k_proj" in pattern or "v_proj" in pattern
            if kv_proj and isinstance(out, dict) and not out.get("is_dynamic", True):
                return True
    return False


@dataclass(frozen=True)
class _AttentionShape:
    """The attention facts of a config: kind, head size, KV heads and the MLA ranks."""

    kind: AttentionKind
    head_dim: int
    kv_heads: int
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None


def _attention_shape(cfg: dict[str, Any], hidden: int, heads: int) -> _AttentionShape:
    """The attention kind and sizes the KV-cache estimate needs.

    MLA when the config has a KV LoRA rank (one latent shared by every head, so
    KV heads = heads); else MHA, MQA or GQA by how many KV heads there are.
    """
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    kv_lora = first_int(cfg, "kv_lora_rank")
    rope = first_int(cfg, "qk_rope_head_dim")
    if kv_lora:
        head_dim = int((cfg.get("qk_nope_head_dim") or 0) + (rope or 0)) or hidden // heads
        return _AttentionShape(AttentionKind.MLA, head_dim, heads, kv_lora, rope)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    kind = (
        AttentionKind.MHA
        if kv_heads == heads
        else AttentionKind.MQA
        if kv_heads == 1
        else AttentionKind.GQA
    )
    return _AttentionShape(kind, head_dim, kv_heads, kv_lora, None)


def _sliding_window(cfg: dict[str, Any]) -> int | None:
    """The sliding window in tokens; None when off, absent or not a positive int."""
    window = cfg.get("sliding_window")
    if cfg.get("use_sliding_window") is False or not isinstance(window, int) or window <= 0:
        return None
    return window


def _weight_bytes(
    est: ParamEstimate, qcfg: dict[str, Any], quant: Any, dtype: str
) -> tuple[int, float]:
    """(weight bytes, the routed experts' share of them) from the parameter estimate.

    A pre-quantized checkpoint stores its quantizable weights at the scheme's
    bits; the attention stays at the model dtype when the config lists
    ``self_attn`` among the modules not converted.
    """
    wbits = quantized_bits(qcfg, dtype) if quant else None
    elem = DTYPE_BYTES.get(dtype.lower(), 2)
    if wbits is None:
        weight_bytes = int(est.total * elem)
    else:
        skip = " ".join(str(m) for m in qcfg.get("modules_to_not_convert") or [])
        quantized = est.mlp_linear if "self_attn" in skip else est.quantizable
        weight_bytes = int(quantized * wbits / 8 + (est.total - quantized) * elem)
    routed_bytes = est.routed_experts * (wbits / 8 if wbits is not None else elem)
    share = min(routed_bytes / weight_bytes, 1.0) if weight_bytes else 0.0
    return weight_bytes, share


# Layer kinds of HF ``layer_types`` lists that keep a KV cache (the rest: linear attention,
# Mamba/SSM, short convolutions, keep a fixed-size recurrent state per request).
_KV_LAYER_TYPES = {"full_attention", "attention", "sliding_attention", "chunked_attention"}


def _kv_layers(cfg: dict[str, Any], layers: int) -> int | None:
    """How many layers of a hybrid model keep a KV cache; None for a plain decoder.

    Read as vLLM's hybrid models read the HF config: ``layer_types`` (Qwen3.5, Qwen3-Next,
    newer configs), ``full_attention_interval`` (Qwen3-Next: every n-th layer is full
    attention), ``hybrid_override_pattern`` (Nemotron-H: ``*`` marks an attention layer).
    """
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds and all(isinstance(k, str) for k in kinds):
        count = sum(k in _KV_LAYER_TYPES for k in kinds)
        return count if count < len(kinds) else None
    interval = cfg.get("full_attention_interval")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 1:
        return layers // interval
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern and "*" in pattern:
        return pattern.count("*") if pattern.count("*") < len(pattern) else None
    return None


def _hybrid(
    cfg: dict[str, Any], layers: int, dtype: str, notes: list[str]
) -> tuple[int | None, int]:
    """(layers keeping a KV cache or None, the others' recurrent state elements), noted."""
    kv_layers = _kv_layers(cfg, layers)
    if kv_layers is None:
        return None, 0
    recurrent = _state_layers(cfg, layers - kv_layers) * hybrid_state.elements_per_layer(cfg)
    state = (
        f"{recurrent * DTYPE_BYTES.get(dtype.lower(), 2) / 2**20:,.1f} MiB per request, "
        "counted per request in the fit"
        if recurrent
        else "not known for this family, not counted"
    )
    notes.append(
        f"hybrid model: {kv_layers} of {layers} layers keep a KV cache; the others "
        f"(linear attention / Mamba) keep a fixed per-request state ({state})"
    )
    return kv_layers, recurrent


def _encoder(cfg: dict[str, Any], layers: int, notes: list[str]) -> encoder_decoder.EncoderFacts:
    """An encoder-decoder's encoder, noted."""
    encoder = encoder_decoder.encoder_facts(cfg)
    notes.append(
        f"encoder-decoder: {encoder.layers} encoder and {layers} decoder layers; the decoder's "
        f"KV per generated token, plus cross-attention K/V of {encoder.positions:,} encoder "
        "positions per request, counted per request in the fit"
    )
    return encoder


def _state_layers(cfg: dict[str, Any], other: int) -> int:
    """Layers that keep a recurrent state: Nemotron-H's ``M`` (its ``-`` are MLPs), the
    linear-attention / Mamba kinds of ``layer_types``, else every non-attention layer."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and "*" in pattern:
        return pattern.count("M")
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds:
        return sum(isinstance(k, str) and ("linear" in k or "mamba" in k) for k in kinds)
    return other


def from_config(raw: dict[str, Any], *, name: str, source: str, path: Path | None) -> ModelInfo:
    """Builds a :class:`ModelInfo` from a config dict; sizes are config estimates.

    Raises:
        ModelError: when a field every decoder config has is missing, or a field
            the analysis reads has the wrong type or an absurd value (see
            :func:`tuner.model.config_check.check_config`).
    """
    cfg = text_config(raw)
    encdec = encoder_decoder.is_encoder_decoder(cfg)
    if encdec:  # Whisper naming: the decoder under decoder-only names
        cfg = encoder_decoder.decoder_view(cfg)
    check_config(cfg, name)  # every field read below: type and range (tuner.model.config_check)
    cfg = normalized(cfg)
    layers = int(cfg["num_hidden_layers"])
    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    shape = _attention_shape(cfg, hidden, heads)
    moe = moe_from_config(cfg, layers)
    archs = cfg.get("architectures") or []
    arch = archs[0] if archs else None
    model_type = cfg.get("model_type")
    stated_qcfg = cfg.get("quantization_config")
    qcfg: dict[str, Any] = stated_qcfg if isinstance(stated_qcfg, dict) else {}
    quant = qcfg.get("quant_method") if qcfg else None
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    notes: list[str] = []
    if not (cfg.get("torch_dtype") or cfg.get("dtype")):
        notes.append("config names no dtype; bfloat16 assumed")
    est = encoder_decoder.param_estimate(cfg) if encdec else estimate_params(cfg, moe)
    weight_bytes, routed_share = _weight_bytes(est, qcfg, quant, dtype)
    kv_layers, recurrent = _hybrid(cfg, layers, dtype, notes)
    encoder = _encoder(cfg, layers, notes) if encdec else None
    return ModelInfo(
        name=name,
        source=source,
        path=path,
        architecture=arch,
        model_type=model_type,
        attention=shape.kind,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        kv_lora_rank=shape.kv_lora_rank,
        qk_rope_head_dim=shape.qk_rope_head_dim,
        vocab_size=int(cfg.get("vocab_size") or 0),
        max_position_embeddings=first_int(cfg, "max_position_embeddings"),
        moe=moe,
        is_gpt_oss=model_type == "gpt_oss" or (arch or "").startswith("GptOss"),
        sliding_window=_sliding_window(cfg),
        quant_method=str(quant).lower() if quant else None,
        kv_scales_static=kv_scales_static(qcfg) if qcfg else False,
        dtype=dtype,
        param_count=est.total,
        active_param_count=est.active,
        weight_bytes=weight_bytes,
        weights_source="config-estimate",
        params_source="config-estimate",
        routed_expert_share=routed_share,
        kv_layers=kv_layers,
        encoder_positions=encoder.positions if encoder is not None else 0,
        recurrent_state_elements=recurrent,
        notes=notes,
        config=raw,
    )
