"""Model analysis on a generated tiny checkpoint: safetensors headers, index, cache, fit.

The tensors are written here by hand (header + zero bytes), so the expected
parameter count and byte size are the sums of the shapes this test chose, not
anything tunelab computed.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from tuner.model import GIB, analyze, fit, from_config
from tuner.model.info import ModelInfo

CONFIGS = Path(__file__).parent / "data" / "hf-configs"

TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def tiny_tensors() -> dict[str, list[int]]:
    hd = 64 // 4
    shapes = {
        "model.embed_tokens.weight": [256, 64],
        "lm_head.weight": [256, 64],
        "model.norm.weight": [64],
    }
    for i in range(2):
        p = f"model.layers.{i}."
        shapes |= {
            p + "self_attn.q_proj.weight": [4 * hd, 64],
            p + "self_attn.k_proj.weight": [2 * hd, 64],
            p + "self_attn.v_proj.weight": [2 * hd, 64],
            p + "self_attn.o_proj.weight": [64, 4 * hd],
            p + "mlp.gate_proj.weight": [128, 64],
            p + "mlp.up_proj.weight": [128, 64],
            p + "mlp.down_proj.weight": [64, 128],
            p + "input_layernorm.weight": [64],
            p + "post_attention_layernorm.weight": [64],
        }
    return shapes


def write_safetensors(
    path: Path, shapes: dict[str, list[int]], elem: int = 2, dtype: str = "BF16"
) -> int:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = math.prod(shape) * elem
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * offset)
    return offset


@pytest.fixture
def tiny_dir(tmp_path: Path) -> Path:
    out = tmp_path / "tiny"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(TINY))
    return out


def test_local_dir_reads_safetensors_headers(tiny_dir: Path) -> None:
    shapes = tiny_tensors()
    nbytes = write_safetensors(tiny_dir / "model.safetensors", shapes)
    expected = sum(math.prod(s) for s in shapes.values())
    info = analyze(str(tiny_dir))
    assert info.source == "local-dir"
    assert info.weights_source == "safetensors" and info.params_source == "safetensors"
    assert info.param_count == expected
    assert info.weight_bytes == nbytes == expected * 2
    # the config-only estimate agrees with the real tensors for the Llama shape
    assert from_config(TINY, name="t", source="x", path=None).param_count == expected
    assert info.kv_bytes_per_token() == 2 * 2 * 2 * 16 * 2
    assert info.attention == "GQA"


def test_sharded_checkpoint_sums_every_shard(tiny_dir: Path) -> None:
    shapes = tiny_tensors()
    names = list(shapes)
    half = len(names) // 2
    a = write_safetensors(
        tiny_dir / "model-00001-of-00002.safetensors", {n: shapes[n] for n in names[:half]}
    )
    b = write_safetensors(
        tiny_dir / "model-00002-of-00002.safetensors", {n: shapes[n] for n in names[half:]}
    )
    weight_map = {n: "model-00001-of-00002.safetensors" for n in names[:half]}
    weight_map |= {n: "model-00002-of-00002.safetensors" for n in names[half:]}
    (tiny_dir / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": a + b}, "weight_map": weight_map})
    )
    info = analyze(str(tiny_dir / "config.json"))
    assert info.weights_source == "safetensors" and info.weight_bytes == a + b


def test_partial_download_falls_back_to_index_total_size(tiny_dir: Path) -> None:
    (tiny_dir / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "metadata": {"total_size": 123456789},
                "weight_map": {"x": "model-00001-of-00009.safetensors"},
            }
        )
    )
    info = analyze(str(tiny_dir))
    assert info.weights_source == "index" and info.weight_bytes == 123456789
    assert info.params_source == "config-estimate"


def test_corrupt_safetensors_falls_back_to_config_estimate(tiny_dir: Path) -> None:
    (tiny_dir / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    info = analyze(str(tiny_dir))
    assert info.weights_source == "config-estimate"
    assert any("estimated from the config" in n for n in info.notes)


def test_hf_cache_is_used_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub.constants as hc

    cache = tmp_path / "hub"
    repo = cache / "models--tiny-org--tiny-llama"
    commit = "a" * 40
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (snap / "config.json").write_text(json.dumps(TINY))
    nbytes = write_safetensors(snap / "model.safetensors", tiny_tensors())
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    info = analyze("tiny-org/tiny-llama")
    assert info.source == "hf-cache" and info.weight_bytes == nbytes


def test_prequantized_static_kv_scales_detected() -> None:
    quark = dict(
        TINY,
        quantization_config={"quant_method": "quark", "kv_cache_group": ["*k_proj", "*v_proj"]},
    )
    assert from_config(quark, name="q", source="x", path=None).kv_scales_static
    compressor = dict(
        TINY,
        quantization_config={"quant_method": "compressed-tensors", "kv_cache_scheme": "static"},
    )
    assert from_config(compressor, name="c", source="x", path=None).kv_scales_static
    dynamic = dict(
        TINY, quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"}
    )
    info = from_config(dynamic, name="d", source="x", path=None)
    assert info.quant_method == "fp8" and not info.kv_scales_static


def llama8b() -> ModelInfo:
    return analyze(str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"))


def test_fit_llama_8b_on_one_mi300x() -> None:
    info = llama8b()
    est = fit(
        info,
        vram_bytes_per_gpu=192 * GIB,
        gpu_memory_utilization=0.9,
        max_num_seqs=256,
        max_model_len=8192,
    )
    usable = int(192 * GIB * 0.9)
    weights = 8_030_261_248 * 2
    assert est.weights_bytes_per_gpu == weights
    assert est.kv_tokens_fit == (usable - weights - est.overhead_bytes_per_gpu) // 131072
    assert est.tokens_needed == 256 * 8192
    assert est.weights_fit and est.holds_one_sequence
    assert est.fits is (est.kv_tokens_fit >= 256 * 8192)
    assert est.max_concurrent_sequences == est.kv_tokens_fit // 8192


def test_fit_uses_workload_need_and_fp8_kv_doubles_tokens() -> None:
    info = llama8b()
    auto = fit(info, vram_bytes_per_gpu=64 * GIB, max_model_len=8192, tokens_needed=32 * 2048)
    fp8 = fit(
        info,
        vram_bytes_per_gpu=64 * GIB,
        max_model_len=8192,
        tokens_needed=32 * 2048,
        kv_cache_dtype="fp8",
    )
    assert auto.tokens_needed == 32 * 2048 and auto.fits
    assert fp8.kv_tokens_fit in (2 * auto.kv_tokens_fit, 2 * auto.kv_tokens_fit + 1)


def test_fit_70b_bf16_does_not_fit_one_80g_gpu() -> None:
    info = analyze(str(CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json"))
    one = fit(info, vram_bytes_per_gpu=80 * GIB, max_model_len=8192)
    assert not one.weights_fit and not one.fits and one.kv_tokens_fit == 0
    four = fit(
        info,
        vram_bytes_per_gpu=80 * GIB,
        max_model_len=8192,
        tensor_parallel_size=4,
        max_num_seqs=32,
    )
    assert four.weights_fit and four.holds_one_sequence
    # TP 4 splits the 8 KV heads: 2 per GPU
    assert four.kv_bytes_per_token_per_gpu == 327680 // 4


def test_fit_tp_beyond_kv_heads_replicates_and_mla_replicates() -> None:
    info = llama8b()
    est = fit(info, vram_bytes_per_gpu=192 * GIB, tensor_parallel_size=16)
    assert est.kv_bytes_per_token_per_gpu == 131072 // 8  # one of 8 KV heads per rank
    ds = analyze(str(CONFIGS / "deepseek-ai__DeepSeek-V3.json"))
    tp8 = fit(
        ds,
        vram_bytes_per_gpu=192 * GIB,
        tensor_parallel_size=8,
        max_model_len=16384,
        max_num_seqs=64,
    )
    assert tp8.kv_bytes_per_token_per_gpu == 70272  # latent replicated on every TP rank
    assert tp8.weights_fit
    assert not fit(ds, vram_bytes_per_gpu=192 * GIB).weights_fit


def test_hub_path_uses_config_and_safetensors_metadata(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The hub cannot be reached here: fake only the two network calls, at the library boundary."""
    import types

    import huggingface_hub
    import huggingface_hub.constants as hc

    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    calls: list[str] = []

    def fake_download(repo_id: str, filename: str, revision: str | None = None) -> str:
        calls.append(f"{repo_id}/{filename}")
        if filename != "config.json":  # the hub's answer for a file the repo does not have
            raise huggingface_hub.errors.EntryNotFoundError(f"{filename} not found")
        return str(config)

    def fake_metadata(repo_id: str, revision: str | None = None) -> object:
        calls.append(f"{repo_id}:metadata")
        return types.SimpleNamespace(parameter_count={"BF16": 1000, "F32": 10})

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", fake_metadata)
    info = analyze("org/remote-model", offline=False)
    # vLLM reads ModelOpt's hf_quant_config.json beside config.json: so does tunelab (issue 27).
    assert calls == [
        "org/remote-model/config.json",
        "org/remote-model/hf_quant_config.json",
        "org/remote-model:metadata",
    ]
    assert info.source == "hub" and info.weights_source == "hub-metadata"
    assert info.weight_bytes == 1000 * 2 + 10 * 4 and info.param_count == 1010


def test_hub_failure_is_a_clear_model_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub
    import huggingface_hub.constants as hc

    from tuner.model import ModelError

    def unreachable(*args: object, **kwargs: object) -> str:
        raise OSError("network is unreachable")

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    with pytest.raises(ModelError, match=r"could not fetch org/x/config\.json"):
        analyze("org/x", offline=False)


def test_generated_demo_model() -> None:
    demo = pytest.importorskip("tuner.demo_model")
    shape = demo.SHAPE
    info = analyze(str(demo.ensure_demo_model()))
    h, v, i, n = (
        shape.hidden_size,
        shape.vocab_size,
        shape.intermediate_size,
        shape.num_hidden_layers,
    )
    head_dim = h // shape.num_attention_heads
    kv = shape.num_key_value_heads * head_dim
    per_layer = h * h + 2 * h * kv + h * h + 3 * h * i + 2 * h
    expected = 2 * v * h + h + n * per_layer  # untied embeddings and LM head
    assert info.weights_source == "safetensors"
    assert info.param_count == expected and info.weight_bytes == expected * 2
    assert head_dim == 64 and info.head_dim == 64
    assert info.kv_bytes_per_token() == 2 * n * shape.num_key_value_heads * 64 * 2
