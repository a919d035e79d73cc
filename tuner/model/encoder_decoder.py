"""Encoder-decoder models (Whisper, BART naming): the decoder as the analysis reads it (issue 27).

vLLM serves encoder-decoder models (Whisper, its speech-to-text family) with
the encoder run once per request and the decoder generating; the KV cache
holds the decoder's self-attention per generated token and, per request, the
cross-attention keys and values of every encoder position (vLLM's
``CrossAttentionSpec``, sized by the encoder's input length). Their configs
name things their own way — ``d_model``, ``decoder_layers``,
``decoder_attention_heads``, ``decoder_ffn_dim``, ``max_target_positions``
for the decoder, ``encoder_*`` and ``max_source_positions`` for the encoder —
and tunelab refused them as "not decoder-only". :func:`decoder_view` gives
the analysis the decoder under decoder-only names, :func:`encoder_facts` the
encoder's size, and :func:`params` the parameter count of both halves (two
linear layers per MLP, biases, cross-attention), checked against the
published 1.54 B of Whisper large-v3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.model.params import ParamEstimate

# Config fields of the encoder-decoder naming, bounded like the decoder's (config_check).
SIZES: dict[str, int] = {
    "d_model": 1_000_000,
    "encoder_layers": 10_000,
    "decoder_layers": 10_000,
    "encoder_attention_heads": 100_000,
    "decoder_attention_heads": 100_000,
    "encoder_ffn_dim": 10_000_000,
    "decoder_ffn_dim": 10_000_000,
    "max_source_positions": 1_000_000_000,
    "max_target_positions": 1_000_000_000,
    "num_mel_bins": 100_000,
}

# Decoder-only name <- encoder-decoder name, for the decoder half.
_DECODER_NAMES = (
    ("num_hidden_layers", "decoder_layers"),
    ("hidden_size", "d_model"),
    ("num_attention_heads", "decoder_attention_heads"),
    ("num_key_value_heads", "decoder_attention_heads"),
    ("intermediate_size", "decoder_ffn_dim"),
    ("max_position_embeddings", "max_target_positions"),
)


def is_encoder_decoder(cfg: Mapping[str, Any]) -> bool:
    """The config describes an encoder-decoder in this naming (``d_model`` and ``decoder_layers``)."""
    return "d_model" in cfg and "decoder_layers" in cfg and "hidden_size" not in cfg


def decoder_view(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with the decoder's sizes also under decoder-only names (``hidden_size`` ...).

    Values are copied as they are; :func:`tuner.model.config_check.check_config`
    then checks both names. The decoder's names win over any the config has:
    transformers writes Whisper's ``num_hidden_layers`` as the *encoder's*
    layer count (distil-whisper: 32 encoder, 2 decoder layers).
    ``is_encoder_decoder`` is set, which is what vLLM and tunelab's backend
    table read for the attention type.
    """
    out = dict(cfg)
    for name, source in _DECODER_NAMES:
        if cfg.get(source) is not None:
            out[name] = cfg[source]
    out["is_encoder_decoder"] = True
    return out


@dataclass(frozen=True)
class EncoderFacts:
    """The encoder's size, as the memory fit needs it.

    Attributes:
        layers: Encoder layers.
        positions: Encoder positions a request fills (Whisper: 1500 for 30 s of
            audio); the decoder keeps cross-attention K and V for each.
    """

    layers: int
    positions: int


def encoder_facts(cfg: Mapping[str, Any]) -> EncoderFacts:
    """The encoder's layers and positions (checked sizes: config_check ran first)."""
    return EncoderFacts(
        layers=int(cfg.get("encoder_layers") or 0),
        positions=int(cfg.get("max_source_positions") or 0),
    )


def _layer(d: int, ffn: int, attentions: int) -> int:
    """One pre-norm layer: ``attentions`` blocks (q, k, v, out; biases but k's), a norm
    each, and a two-layer MLP (fc1, fc2 with biases) with its norm."""
    attention = 4 * d * d + 3 * d
    norms = 2 * d * (attentions + 1)
    mlp = d * ffn + ffn + ffn * d + d
    return attentions * attention + norms + mlp


def params(cfg: Mapping[str, Any]) -> int:
    """Parameters of both halves: encoder (its conv front-end when it has mel bins), decoder
    with cross-attention, embeddings and positions; the output head tied to the embedding.
    """
    d = int(cfg["d_model"])
    enc_layers, dec_layers = int(cfg.get("encoder_layers") or 0), int(cfg["decoder_layers"])
    enc_ffn = int(cfg.get("encoder_ffn_dim") or 4 * d)
    dec_ffn = int(cfg.get("decoder_ffn_dim") or 4 * d)
    vocab = int(cfg.get("vocab_size") or 0)
    mels = int(cfg.get("num_mel_bins") or 0)
    front = (mels * d * 3 + d) + (d * d * 3 + d) if mels else vocab * d  # conv1/conv2, or tokens
    encoder = front + int(cfg.get("max_source_positions") or 0) * d + 2 * d
    encoder += enc_layers * _layer(d, enc_ffn, 1)
    decoder = vocab * d + int(cfg.get("max_target_positions") or 0) * d + 2 * d
    decoder += dec_layers * _layer(d, dec_ffn, 2)
    head = 0 if cfg.get("tie_word_embeddings", True) else vocab * d
    return encoder + decoder + head


def param_estimate(cfg: Mapping[str, Any]) -> ParamEstimate:
    """:func:`params` by part, as the weight-bytes estimate reads it (all dense: active = total)."""
    d = int(cfg["d_model"])
    enc, dec = int(cfg.get("encoder_layers") or 0), int(cfg["decoder_layers"])
    enc_ffn = int(cfg.get("encoder_ffn_dim") or 4 * d)
    dec_ffn = int(cfg.get("decoder_ffn_dim") or 4 * d)
    total = params(cfg)
    return ParamEstimate(
        total=total,
        active=total,
        attention_linear=enc * 4 * d * d + dec * 8 * d * d,
        mlp_linear=enc * 2 * d * enc_ffn + dec * 2 * d * dec_ffn,
    )
