"""Absurd config.json values are refused with a message, before anything loops per layer (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.model.info import SIZE_BOUNDS, ModelError, from_config

CONFIGS = Path(__file__).resolve().parents[2] / "shared" / "data" / "hf-configs"
LOCAL = Path(__file__).resolve().parent / "data" / "hf-configs"
LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"


def _llama() -> dict:
    folder = CONFIGS if (CONFIGS / LLAMA).exists() else LOCAL
    return json.loads((folder / LLAMA).read_text())


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_hidden_layers", 1e30),  # looped per layer: hung before
        ("num_hidden_layers", 0),
        ("hidden_size", -5),
        ("hidden_size", "abc"),
        ("num_attention_heads", 2.5),
        ("vocab_size", float("nan")),
        ("intermediate_size", True),
        ("num_key_value_heads", 10**12),
    ],
)
def test_absurd_size_is_a_model_error_naming_the_field(key: str, value: object) -> None:
    cfg = {**_llama(), key: value}
    with pytest.raises(ModelError, match=rf"{key} = .*whole number from 1 to"):
        from_config(cfg, name="m", source="test", path=None)


def test_every_published_config_is_within_bounds() -> None:
    folder = CONFIGS if CONFIGS.is_dir() else LOCAL
    paths = sorted(folder.glob("*.json"))
    assert len(paths) >= 8
    for path in paths:
        info = from_config(json.loads(path.read_text()), name=path.stem, source="t", path=None)
        assert info.num_layers >= 1


def test_integral_floats_are_accepted() -> None:
    info = from_config({**_llama(), "num_hidden_layers": 32.0}, name="m", source="t", path=None)
    assert info.num_layers == 32
    assert "num_hidden_layers" in SIZE_BOUNDS
