"""Finding a model's config and weights metadata: local path, HF cache, or hub.

The order mirrors what ``vllm serve`` itself would load: an existing path wins;
otherwise the id is looked up in the Hugging Face cache, and only when online
(``HF_HUB_OFFLINE`` unset and ``offline`` not forced) is the hub asked — for
``config.json`` and the safetensors headers, never the weights.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tuner import bounded
from tuner.bounded import MIB
from tuner.model.info import ModelError, ModelInfo, from_config
from tuner.model.weights import SafetensorsError, WeightsMeta, hub_weights, local_weights
from tuner.switches import switch_state


def hub_offline() -> bool:
    """True when the environment forbids the hub (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)."""
    return any(
        switch_state(os.environ.get(var, "")) is True
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


# Real config.json files are a few KB (multimodal ones tens of KB); 16 MiB is generous.
MAX_CONFIG_BYTES = 16 * MIB


def _read_json(path: Path) -> dict[str, Any]:
    """The config at ``path``, read with a byte and nesting limit (tuner.bounded).

    Raises:
        ModelError: unreadable, not a regular file, too large, not JSON (numbers
            past Python's digit limit included) or not an object.
    """
    try:
        data = bounded.loads(
            bounded.read_bytes(path, max_bytes=MAX_CONFIG_BYTES, what="model config"),
            what=f"model config {path}",
        )
    except (bounded.InputTooLargeError, bounded.NotAFileError) as exc:
        raise ModelError(str(exc), fix=exc.fix) from None
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit
        why = "a number with thousands of digits" if "digits" in str(exc) else str(exc)
        raise ModelError(
            f"{path} is not valid JSON ({why}); is it a model's config.json?",
            fix="check the model's config.json (a corrupt or hand-edited file?)",
        ) from None
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object; a config.json is one")
    return data


def _looks_like_path(model: str) -> bool:
    return (
        model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 or model.endswith(".json")
    )


def analyze(model: str, *, offline: bool | None = None, revision: str | None = None) -> ModelInfo:
    """Reads a model's architecture and sizes (see :class:`ModelInfo`).

    Args:
        model: A local directory holding ``config.json``, a path to a config
            file, or a Hugging Face id (``org/name``).
        offline: Force (True) or forbid (False) offline mode; None follows
            ``HF_HUB_OFFLINE``. Local paths never touch the network.
        revision: Hub revision for ids (branch, tag or commit).

    Raises:
        ModelError: with what was tried and how to make the model available.
    """
    text = model.strip()
    if not text:
        raise ModelError(
            "no model given: pass a local directory, a config.json path or an org/name id"
        )
    try:
        return _analyze_text(text, offline=offline, revision=revision)
    except OSError as exc:  # a name the file system cannot take (too long, a loop)
        raise ModelError(
            f"cannot look up the model {text!r}: {exc.strerror or exc}",
            fix="give an existing directory, a config.json path or an org/name id",
        ) from None


def _analyze_text(text: str, *, offline: bool | None, revision: str | None) -> ModelInfo:
    """:func:`analyze` of a stripped, non-empty model string."""
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # ~user of a user this machine does not know
        raise ModelError(
            f"{text} names the home folder of an unknown user",
            fix="give the model's path without ~user, or an org/name id",
        ) from None
    if path.is_file():
        raw = _read_json(path)
        if path.name == "config.json":
            raw = with_side_quant_config(raw, _local_side_file(path.parent))
        info = from_config(raw, name=text, source="config-file", path=path.parent)
        if path.name == "config.json":
            _apply_weights(info, _safe_local(path.parent))
        else:
            info.notes.append("a lone config file: weight bytes estimated from the config")
        return info
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ModelError(
                f"{path} has no config.json; point --model at the model's directory "
                "(the one holding config.json and the *.safetensors files)"
            )
        raw = with_side_quant_config(_read_json(config), _local_side_file(path))
        info = from_config(raw, name=text, source="local-dir", path=path)
        _apply_weights(info, _safe_local(path))
        return info
    if _looks_like_path(text):
        raise ModelError(f"{text} does not exist; give an existing directory or a Hugging Face id")
    cached = _from_cache(text, revision)
    if cached is not None:
        return cached
    if offline if offline is not None else hub_offline():
        raise ModelError(
            f"{text} is not in the local Hugging Face cache and offline mode is on; download "
            f"it first (`hf download {text} config.json`), pass a local path, or unset HF_HUB_OFFLINE"
        )
    return _from_hub(text, revision)


SIDE_QUANT_FILE = "hf_quant_config.json"


def _local_side_file(directory: Path) -> Path | None:
    found = directory / SIDE_QUANT_FILE
    return found if found.is_file() else None


def with_side_quant_config(raw: dict[str, Any], side: Path | None) -> dict[str, Any]:
    """The config with ModelOpt's ``hf_quant_config.json`` as its quantization config.

    vLLM reads that file when config.json has no ``quantization_config`` (ModelOpt 0.29 and
    before; vllm/transformers_utils/config.py), and runs the method its ``quant_algo`` maps
    to (``modelopt`` for FP8, ``modelopt_fp4`` for NVFP4: the release's table, read from
    vLLM's ``modelopt.LINEAR_ALGOS``). Without it an FP8 checkpoint is sized as BF16.
    """
    if side is None or isinstance(raw.get("quantization_config"), dict):
        return raw
    data: dict[str, Any] = _read_json(side)
    inner = data.get("quantization")
    block: dict[str, Any] = inner if isinstance(inner, dict) else data
    algo = str(block.get("quant_algo") or "").upper()
    if not algo:
        return raw
    from tuner.vllm_tables import table  # one JSON file, read on first use

    method = table().quantization.get("modelopt_algos", {}).get(algo, "modelopt")
    quant = {
        "quant_method": method,
        "quant_algo": algo,
        "kv_cache_quant_algo": block.get("kv_cache_quant_algo"),
        "exclude_modules": block.get("exclude_modules") or [],
        "source": SIDE_QUANT_FILE,
    }
    return {**raw, "quantization_config": quant}


def _safe_local(directory: Path) -> WeightsMeta | str:
    """The shards' metadata, or why there is none (a reason the user is told)."""
    try:
        return local_weights(directory) or "no safetensors metadata found"
    except (SafetensorsError, OSError) as exc:
        return f"safetensors metadata unreadable ({exc})"


def _apply_weights(info: ModelInfo, meta: WeightsMeta | str | None) -> None:
    """Replaces the config estimate with metadata figures where they are trustworthy."""
    if not isinstance(meta, WeightsMeta):
        why = meta or "no safetensors metadata found"
        info.notes.append(f"{why}; weight bytes estimated from the config")
        return
    info.weight_bytes = meta.total_bytes
    info.weights_source = meta.source
    packed = {"U8", "I8", "U32", "I32", "F8_E8M0"} & set(meta.by_dtype)
    if meta.elements and not info.is_prequantized and not packed:
        # Unquantized checkpoints: elements are parameters. Keep the config's
        # active share (MoE) by scaling with the same ratio.
        ratio = info.active_param_count / info.param_count if info.param_count else 1.0
        if abs(meta.elements - info.param_count) > 0.02 * max(info.param_count, 1):
            info.notes.append(
                f"safetensors hold {meta.elements:,} parameters; the config implies "
                f"{info.param_count:,} (extra tensors such as MTP layers, or an unknown layout)"
            )
        info.param_count = meta.elements
        info.active_param_count = int(meta.elements * ratio)
        info.params_source = meta.source


def _from_cache(model: str, revision: str | None) -> ModelInfo | None:
    # Deferred: heavy (huggingface_hub): loaded only on the path that needs it.
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model, "config.json", revision=revision)
    except Exception:
        return None
    if not isinstance(found, str):
        return None
    config = Path(found)
    raw = with_side_quant_config(_read_json(config), _local_side_file(config.parent))
    info = from_config(raw, name=model, source="hf-cache", path=config.parent)
    meta = _safe_local(config.parent)
    if not isinstance(meta, WeightsMeta):
        try:
            index = try_to_load_from_cache(model, "model.safetensors.index.json", revision=revision)
        except Exception:  # as for config.json above: no cache entry, whatever the reason
            index = None
        if isinstance(index, str):
            meta = _safe_local(Path(index).parent)
    _apply_weights(info, meta)
    return info


def _from_hub(model: str, revision: str | None) -> ModelInfo:
    # Deferred: heavy (huggingface_hub): loaded only on the path that needs it.
    from huggingface_hub import hf_hub_download

    try:
        config = Path(hf_hub_download(model, "config.json", revision=revision))
    except Exception as exc:
        raise ModelError(
            f"could not fetch {model}/config.json from the Hugging Face hub "
            f"({type(exc).__name__}: {exc}); check the id, your network and HF_TOKEN, "
            "or pass a local path"
        ) from None
    raw = _read_json(config)
    side = None
    if not isinstance(raw.get("quantization_config"), dict):
        try:
            side = Path(hf_hub_download(model, SIDE_QUANT_FILE, revision=revision))
        except Exception:  # most checkpoints have none (the hub answers 404)
            side = None
    raw = with_side_quant_config(raw, side)
    info = from_config(raw, name=model, source="hub", path=None)
    _apply_weights(info, hub_weights(model, revision))
    return info
