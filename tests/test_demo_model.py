"""The generated tiny model: shape, determinism, atomic creation, readable files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tokenizers import Tokenizer

from tuner.demo_model import SHAPE, demo_model_dir, ensure_demo_model


def _header(path: Path) -> dict:
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        return json.loads(fh.read(n))


def test_demo_model_is_a_small_llama_with_head_dim_64() -> None:
    path = ensure_demo_model()
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["hidden_size"] // cfg["num_attention_heads"] == 64 == cfg["head_dim"]
    header = _header(path / "model.safetensors")
    assert header["model.embed_tokens.weight"]["dtype"] == "BF16"
    assert header["model.embed_tokens.weight"]["shape"] == [SHAPE.vocab_size, SHAPE.hidden_size]
    layer_keys = [k for k in header if k.startswith("model.layers.0.")]
    assert len(layer_keys) == 9
    size = (path / "model.safetensors").stat().st_size
    assert 100_000 < size < 10_000_000


def test_tokenizer_round_trips_text_within_the_vocab() -> None:
    path = ensure_demo_model()
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    assert tok.get_vocab_size() <= SHAPE.vocab_size
    text = "tunelab measures TTFT and ITL: 1234 ünïcode"
    ids = tok.encode(text).ids
    assert max(ids) < SHAPE.vocab_size
    assert tok.decode(ids) == text


def test_build_is_idempotent_and_deterministic(tmp_path: Path, monkeypatch) -> None:
    first = ensure_demo_model()
    blob = (first / "model.safetensors").read_bytes()
    mtime = (first / "model.safetensors").stat().st_mtime_ns
    assert ensure_demo_model() == first
    assert (first / "model.safetensors").stat().st_mtime_ns == mtime  # not rebuilt
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "other"))
    second = ensure_demo_model()
    assert second != first
    assert (second / "model.safetensors").read_bytes() == blob  # same seed, same weights
    # no temporary build directories are left beside it
    assert [p.name for p in second.parent.iterdir()] == [second.name]
    assert demo_model_dir() == second
