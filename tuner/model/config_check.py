"""Every ``config.json`` field the model analysis reads, checked for type and range first.

A ``config.json`` is foreign input: a corrupt download, a hand edit or a
hostile repository can put ``1e400`` (a JSON number Python reads as
infinity), ``NaN``, ``10**30``, a negative count, a string or an object where
a size belongs, or a number where a name belongs. The analysis multiplies
sizes, loops per layer and calls string methods on names, so one such value
used to raise ``OverflowError``, ``TypeError`` or hang. :func:`check_config`
looks at every field :mod:`tuner.model.info`, :mod:`tuner.model.moe` and
:mod:`tuner.model.params` read, before any of them runs, and refuses the
first bad one with a :class:`ModelError` that names the field, shows the value
(shortened) and says what is accepted. Keeping all the checks here means a
new field read elsewhere has one obvious place to be declared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from tuner.errors import TunelabError
from tuner.model.encoder_decoder import SIZES as ENCODER_DECODER_SIZES


class ModelError(TunelabError, ValueError):
    """A model that cannot be found or read; the message says what to do."""


# Upper bounds on the size fields tunelab reads, far above any published model
# (DeepSeek-V3: 61 layers, 256 experts; Llama-3.1-405B: 126 layers, 16384 hidden),
# so a corrupt or hostile config.json is refused before anything loops per layer.
SIZE_BOUNDS: dict[str, int] = {
    # Encoder-decoder names first: the decoder-only names are copied from them
    # (tuner.model.encoder_decoder), so a bad value is named as the config spells it.
    **ENCODER_DECODER_SIZES,
    "num_hidden_layers": 10_000,
    "hidden_size": 1_000_000,
    "num_attention_heads": 100_000,
    "num_key_value_heads": 100_000,
    "head_dim": 100_000,
    "intermediate_size": 10_000_000,
    "intermediate_size_mlp": 10_000_000,
    "moe_intermediate_size": 10_000_000,
    "shared_expert_intermediate_size": 10_000_000,
    "vocab_size": 100_000_000,
    "max_position_embeddings": 1_000_000_000,
    "kv_lora_rank": 1_000_000,
    "q_lora_rank": 1_000_000,
    "qk_rope_head_dim": 100_000,
    "qk_nope_head_dim": 100_000,
    "v_head_dim": 100_000,
    "n_routed_experts": 100_000,
    "num_local_experts": 100_000,
    "num_experts": 100_000,
    "moe_num_experts": 100_000,
    "num_experts_per_tok": 100_000,
    "experts_per_token": 100_000,
    "moe_topk": 100_000,
    "num_experts_per_token": 100_000,
    "n_shared_experts": 100_000,
    "first_k_dense_replace": 10_000,
    "moe_layer_freq": 10_000,
    "interleave_moe_layer_step": 10_000,
    "decoder_sparse_step": 10_000,
    "sliding_window": 1_000_000_000,
}
# Fields a decoder config cannot do without, and that must be at least 1.
REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads")
# Lists of decoder-layer indices (Llama 4 ``moe_layers``, Qwen-MoE ``mlp_only_layers``).
LAYER_LISTS = ("moe_layers", "mlp_only_layers")
# Names read as text (``architectures`` is a list of them).
NAME_FIELDS = ("model_type", "torch_dtype", "dtype")
MAX_NAME_CHARS = 1_000
# Bits per quantized weight a quantization_config may declare.
MAX_BITS = 64
# ``group_size`` of a group-wise quantizer: -1 means one group per channel.
MAX_GROUP = 1_000_000_000
_SHOWN_CHARS = 60


def shown(value: Any) -> str:
    """``value`` as a short literal for a message: repr (control characters escaped), cut."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "a number too large to print"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _refuse(name: str, field: str, value: Any, expected: str) -> ModelError:
    return ModelError(
        f"{name}: config.json has {field} = {shown(value)}; tunelab expects {expected}",
        fix="check the model's config.json (a corrupt or hand-edited file?)",
    )


def is_whole(value: Any) -> bool:
    """A JSON whole number: an int, or a finite float with no fraction (never a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, float) or (math.isfinite(value) and value.is_integer())


def whole_in(value: Any, low: int, high: int) -> TypeGuard[int | float]:
    """``value`` is a whole number from ``low`` to ``high``."""
    return is_whole(value) and low <= value <= high


def check_sizes(cfg: Mapping[str, Any], name: str) -> None:
    """Refuses size fields that are not whole numbers within :data:`SIZE_BOUNDS`.

    A field may be absent or null; a non-required one may also be 0 (off).

    Raises:
        ModelError: naming the field, its value and the accepted range.
    """
    for key, bound in SIZE_BOUNDS.items():
        value = cfg.get(key)
        if value is None or (key not in REQUIRED and is_whole(value) and value == 0):
            continue
        if not whole_in(value, 1, bound):
            raise _refuse(name, key, value, f"a whole number from 1 to {bound:,}")


def _check_names(cfg: Mapping[str, Any], name: str) -> None:
    archs = cfg.get("architectures")
    if archs is not None and not (
        isinstance(archs, list)
        and all(isinstance(a, str) and len(a) <= MAX_NAME_CHARS for a in archs)
    ):
        raise _refuse(name, "architectures", archs, "a list of class names (strings)")
    for key in NAME_FIELDS:
        value = cfg.get(key)
        if value is not None and not (isinstance(value, str) and len(value) <= MAX_NAME_CHARS):
            raise _refuse(
                name, key, value, f"a name (a string of at most {MAX_NAME_CHARS:,} chars)"
            )


def _check_layer_lists(cfg: Mapping[str, Any], name: str) -> None:
    limit = SIZE_BOUNDS["num_hidden_layers"]
    for key in LAYER_LISTS:
        value = cfg.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or len(value) > limit:
            raise _refuse(name, key, value, f"a list of at most {limit:,} layer indices")
        for item in value:
            if not whole_in(item, 0, limit):
                raise _refuse(name, f"{key}[…]", item, f"a layer index from 0 to {limit:,}")


def _check_quant_numbers(q: Mapping[str, Any], name: str) -> None:
    for key in ("bits", "w_bit"):
        value = q.get(key)
        if value is not None and not whole_in(value, 0, MAX_BITS):
            raise _refuse(name, f"quantization_config.{key}", value, f"0 to {MAX_BITS} bits")
    for key in ("group_size", "q_group_size"):
        value = q.get(key)
        if value is not None and not whole_in(value, -1, MAX_GROUP):
            raise _refuse(
                name,
                f"quantization_config.{key}",
                value,
                f"a whole number from -1 to {MAX_GROUP:,}",
            )
    groups = q.get("config_groups")
    if groups is not None and not isinstance(groups, dict):
        raise _refuse(name, "quantization_config.config_groups", groups, "an object")
    for key, group in (groups or {}).items():
        weights = group.get("weights") if isinstance(group, dict) else None
        bits = weights.get("num_bits") if isinstance(weights, dict) else None
        if bits is not None and not whole_in(bits, 0, MAX_BITS):
            field = f"quantization_config.config_groups.{shown(key)}.weights.num_bits"
            raise _refuse(name, field, bits, f"0 to {MAX_BITS} bits")


def _check_quantization(cfg: Mapping[str, Any], name: str) -> None:
    q = cfg.get("quantization_config")
    if not isinstance(q, dict):
        return  # anything else is read as "not pre-quantized"
    method = q.get("quant_method")
    if method is not None and not (isinstance(method, str) and len(method) <= MAX_NAME_CHARS):
        raise _refuse(name, "quantization_config.quant_method", method, "a method name (a string)")
    skip = q.get("modules_to_not_convert")
    if skip is not None and not isinstance(skip, list | str):
        raise _refuse(name, "quantization_config.modules_to_not_convert", skip, "a list of names")
    _check_quant_numbers(q, name)
    glob = q.get("global_quant_config")
    if glob is None:
        return
    if not isinstance(glob, dict):
        raise _refuse(name, "quantization_config.global_quant_config", glob, "an object")
    weight = glob.get("weight")
    first = weight[0] if isinstance(weight, list) and weight else weight
    if first is not None and not isinstance(first, dict):
        field = "quantization_config.global_quant_config.weight"
        raise _refuse(name, field, weight, "an object (or a list of objects)")


def check_config(cfg: Mapping[str, Any], name: str) -> None:
    """Refuses a (text) config whose fields the analysis cannot use as they are.

    Raises:
        ModelError: a required field is missing, or a field has the wrong type
            or an absurd value (the message names it and says what is accepted).
    """
    missing = [k for k in REQUIRED if cfg.get(k) is None]
    if missing:
        raise ModelError(
            f"{name}: config.json has no {', '.join(missing)}; tunelab reads decoder-only "
            "language models (a transformers config with those fields)"
        )
    check_sizes(cfg, name)
    _check_names(cfg, name)
    _check_layer_lists(cfg, name)
    _check_quantization(cfg, name)


def normalized(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a checked ``cfg`` with whole-number floats (``32.0``) as ints.

    After :func:`check_config`, every size is a whole number; making them ints
    lets the readers that accept ints only (``first_int``) see the same values.
    """
    out = dict(cfg)
    for key in SIZE_BOUNDS:
        value = out.get(key)
        if isinstance(value, float):
            out[key] = int(value)
    for key in LAYER_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [int(i) for i in out[key]]
    return out
