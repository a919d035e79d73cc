"""Model analysis against real published configs, with figures from the model cards.

Expected values are the published architecture (layers, heads, head_dim from
the papers/cards) and published parameter totals, not tunelab's own output.
Active-parameter conventions differ per vendor (DeepSeek and OpenAI leave the
input embedding out); each test says which one it compares against.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.model import AttentionKind, ModelError, analyze, from_config
from tuner.model_info import ModelInfo

CONFIGS = Path(__file__).parent / "data" / "hf-configs"


def load(name: str) -> ModelInfo:
    info = analyze(str(CONFIGS / f"{name}.json"))
    assert info.source == "config-file"
    return info


def close(actual: float, expected: float, rel: float) -> bool:
    return abs(actual - expected) <= rel * expected


def test_every_shared_config_is_copied_and_analyzable() -> None:
    files = sorted(CONFIGS.glob("*.json"))
    # the 9 of ../shared/data; Phi-3-mini, Qwen3-Coder-Next and Whisper large-v3 (issue 27)
    assert len(files) == 12
    for path in files:
        info = analyze(str(path))
        assert info.num_layers > 0 and info.param_count > 0 and info.kv_bytes_per_token() > 0


def test_llama_3_1_8b() -> None:
    info = load("meta-llama__Llama-3.1-8B-Instruct")
    assert info.architecture == "LlamaForCausalLM" and info.model_type == "llama"
    assert info.attention is AttentionKind.GQA
    assert (info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (32, 32, 8, 128)
    # 2 x 32 layers x 8 kv heads x 128 x 2 bytes
    assert info.kv_bytes_per_token() == 131072
    assert info.kv_bytes_per_token("fp8") == 65536
    assert close(info.param_count, 8.03e9, 0.005)  # model card: 8.03B
    assert info.active_param_count == info.param_count and not info.is_moe
    assert close(info.weight_bytes, 16.06e9, 0.01)  # bf16 checkpoint: ~16.1 GB
    assert not info.is_prequantized and info.dtype == "bfloat16" and info.sliding_window is None


def test_llama_3_1_70b() -> None:
    info = load("meta-llama__Llama-3.1-70B-Instruct")
    assert (info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (80, 64, 8, 128)
    assert info.kv_bytes_per_token() == 2 * 80 * 8 * 128 * 2
    assert close(info.param_count, 70.6e9, 0.005)  # model card: 70.6B


def test_qwen2_5_7b() -> None:
    info = load("Qwen__Qwen2.5-7B-Instruct")
    assert info.attention is AttentionKind.GQA
    assert (info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (28, 28, 4, 128)
    assert info.kv_bytes_per_token() == 2 * 28 * 4 * 128 * 2
    assert close(info.param_count, 7.61e9, 0.005)  # model card: 7.61B
    # use_sliding_window is false: no layer uses the window
    assert info.sliding_window is None


def test_qwen3_30b_a3b_moe() -> None:
    info = load("Qwen__Qwen3-30B-A3B")
    assert info.moe is not None
    assert (info.moe.num_experts, info.moe.experts_per_token, info.moe.shared_experts) == (
        128,
        8,
        0,
    )
    assert info.moe.activation_density == pytest.approx(8 / 128)
    assert info.moe.moe_layers == 48
    assert (info.num_layers, info.num_kv_heads, info.head_dim) == (48, 4, 128)
    assert info.kv_bytes_per_token() == 2 * 48 * 4 * 128 * 2
    assert close(info.param_count, 30.5e9, 0.01)  # model card: 30.5B total
    assert close(info.active_param_count, 3.3e9, 0.03)  # 3.3B activated


def test_qwen3_30b_a3b_fp8_is_prequantized_and_half_the_bytes() -> None:
    fp8 = load("Qwen__Qwen3-30B-A3B-FP8")
    bf16 = load("Qwen__Qwen3-30B-A3B")
    assert fp8.quant_method == "fp8" and fp8.is_prequantized and not fp8.kv_scales_static
    assert fp8.param_count == bf16.param_count
    # linear weights at 1 byte, embeddings/lm_head/norms stay bf16
    assert 0.5 < fp8.weight_bytes / bf16.weight_bytes < 0.56


def test_mixtral_8x7b() -> None:
    info = load("mistralai__Mixtral-8x7B-Instruct-v0.1")
    assert info.moe is not None and info.moe.num_experts == 8 and info.moe.experts_per_token == 2
    assert info.moe.activation_density == pytest.approx(0.25)
    assert info.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2
    assert close(info.param_count, 46.7e9, 0.005)  # Mistral: 46.7B total
    assert close(info.active_param_count, 12.9e9, 0.01)  # 12.9B per token


def test_deepseek_v3_mla_moe() -> None:
    info = load("deepseek-ai__DeepSeek-V3")
    assert info.attention is AttentionKind.MLA and info.is_mla
    assert info.num_layers == 61 and info.kv_lora_rank == 512 and info.qk_rope_head_dim == 64
    # MLA: 61 layers x (512 + 64) x 2 bytes
    assert info.kv_bytes_per_token() == 70272
    assert info.kv_bytes_per_token("fp8_e4m3") == 35136
    assert info.moe is not None
    assert (info.moe.num_experts, info.moe.experts_per_token, info.moe.shared_experts) == (
        256,
        8,
        1,
    )
    assert info.moe.moe_layers == 61 - 3  # first_k_dense_replace = 3
    assert info.moe.activation_density == pytest.approx(8 / 256)
    assert close(info.param_count, 671e9, 0.01)  # paper: 671B (MTP module excluded)
    assert close(info.active_param_count, 37e9, 0.02)  # paper: 37B activated
    assert info.quant_method == "fp8"
    # FP8 checkpoint: roughly a byte per parameter (HF repo ~689 GB incl. the MTP layer)
    assert 0.95 * 671e9 < info.weight_bytes < 689e9


def test_deepseek_v2_lite_mla() -> None:
    info = load("deepseek-ai__DeepSeek-V2-Lite-Chat")
    assert info.is_mla and info.num_layers == 27
    assert info.kv_bytes_per_token() == 27 * (512 + 64) * 2
    assert info.moe is not None and info.moe.shared_experts == 2 and info.moe.num_experts == 64
    assert info.moe.moe_layers == 26
    assert close(info.param_count, 15.7e9, 0.01)  # paper: 15.7B total
    # DeepSeek counts activated parameters without the input embedding: 2.4B
    assert close(info.active_param_count - info.vocab_size * info.hidden_size, 2.4e9, 0.03)


def test_gpt_oss_20b() -> None:
    info = load("openai__gpt-oss-20b")
    assert info.is_gpt_oss and info.architecture == "GptOssForCausalLM"
    assert (info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (24, 64, 8, 64)
    assert info.kv_bytes_per_token() == 2 * 24 * 8 * 64 * 2
    assert info.sliding_window == 128
    assert info.quant_method == "mxfp4"
    assert info.moe is not None and info.moe.num_experts == 32 and info.moe.experts_per_token == 4
    assert close(info.param_count, 20.91e9, 0.01)  # model card: 20.91B total
    # model card: 3.61B active, input embedding not counted
    assert close(info.active_param_count - info.vocab_size * info.hidden_size, 3.61e9, 0.02)
    # MXFP4 experts: the published checkpoint is ~13.8 GB
    assert 12.5e9 < info.weight_bytes < 14.5e9


def test_missing_fields_and_bad_json_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        analyze(str(bad))
    bad.write_text('{"model_type": "bert"}')
    with pytest.raises(ModelError, match="num_hidden_layers"):
        analyze(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelError, match=r"has no config\.json"):
        analyze(str(empty))


def test_nonexistent_path_says_so(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        analyze(str(tmp_path / "nope" / "model"))


def test_offline_uncached_id_is_refused_without_network(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelError, match="offline"):
        analyze("some-org/not-cached-model", offline=True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE"):
        analyze("some-org/not-cached-model")


def test_packed_kv_dtypes_count_the_bytes_vllm_allocates() -> None:
    """Issue 27: KV dtypes added since 0.20 are sized as vLLM 0.32 packs them (the table's
    ``kv_bytes``, read from the backends' customize_spec), not as 2 bytes per element."""
    info = load("meta-llama__Llama-3.1-8B-Instruct")
    # TurboQuant 4-bit: 134 B per token per KV head at head size 128 (packed K and V slots).
    assert info.kv_bytes_per_token("turboquant_4bit_nc") == 32 * 8 * 134
    assert info.kv_bytes_per_token("turboquant_k8v4") == 32 * 8 * 196
    # Per-token-head int8: 1 byte per element plus a 4-byte scale per token, head and K/V.
    assert info.kv_bytes_per_token("int8_per_token_head") == 32 * 8 * (2 * 128 + 8)
    assert info.kv_bytes_per_token("fp8") == 65536 and info.kv_bytes_per_token() == 131072


def test_hybrid_models_count_kv_for_their_attention_layers_only() -> None:
    """Issue 27: a Gated-DeltaNet hybrid keeps KV in 12 of its 48 layers (4x less than all)."""
    info = load("Qwen__Qwen3-Coder-Next")
    assert info.kv_layers == 12 and info.num_layers == 48
    assert info.kv_bytes_per_token() == 2 * 12 * 2 * 256 * 2
    assert any("12 of 48 layers keep a KV cache" in n for n in info.notes)
    raw = json.loads((CONFIGS / "Qwen__Qwen3-Coder-Next.json").read_text())
    del raw["layer_types"]  # the interval alone says the same
    assert from_config(raw, name="n", source="config-file", path=None).kv_layers == 12
    # Nemotron-H's pattern: '*' is an attention layer, 'M' Mamba, '-' an MLP.
    llama = json.loads((CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    pattern = "M-M*" * 8
    hybrid = from_config(
        {**llama, "hybrid_override_pattern": pattern}, name="h", source="config-file", path=None
    )
    assert hybrid.kv_layers == 8
    plain = load("meta-llama__Llama-3.1-8B-Instruct")
    assert plain.kv_layers is None and plain.kv_bytes_per_token() == 131072


def test_a_modelopt_checkpoint_is_sized_by_its_hf_quant_config(tmp_path: Path) -> None:
    """Issue 27: ModelOpt (<= 0.29) checkpoints such as nvidia/Llama-3.1-70B-Instruct-FP8 keep
    their quantization in hf_quant_config.json, which vLLM reads beside config.json. The file
    here has that format ({"producer": ..., "quantization": {"quant_algo": ...}})."""
    from tuner.config import EngineConfig
    from tuner.rules import Target, check

    (tmp_path / "config.json").write_text(
        (CONFIGS / "meta-llama__Llama-3.1-70B-Instruct.json").read_text()
    )
    bf16 = analyze(str(tmp_path))
    side = {
        "producer": {"name": "modelopt", "version": "0.15.0"},
        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None},
    }
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(side))
    fp8 = analyze(str(tmp_path))
    assert fp8.quant_method == "modelopt" and fp8.is_prequantized
    assert 0.45 < fp8.weight_bytes / bf16.weight_bytes < 0.55
    h100 = Target("0.32.0", "cuda", 1, 79.2, gpu_name="H100")

    def more_gpus(info: ModelInfo) -> list[str]:
        found = check(EngineConfig(str(tmp_path)), info, h100)
        return [f.message for f in found if "weights per GPU at TP 1, more than" in f.message]

    assert more_gpus(fp8) == []  # 70 GB of FP8 weights fit one H100 (with a shorter context)
    assert more_gpus(bf16)  # BF16's 141 GB do not
    side["quantization"]["quant_algo"] = "NVFP4"
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(side))
    assert analyze(str(tmp_path)).quant_method == "modelopt_fp4"


def test_an_encoder_decoder_is_read_as_its_decoder_plus_cross_attention() -> None:
    """Whisper large-v3 (issue 27): refused as "not decoder-only" before.

    Published: 1.54 B parameters (1,550 M in OpenAI's table). The decoder's
    self-attention KV per token: 2 x 32 layers x 20 heads x 64 x 2 bytes;
    the cross-attention K/V of 1,500 encoder positions, once per request.
    """
    info = load("openai__whisper-large-v3")
    assert info.is_encoder_decoder and info.encoder_positions == 1500
    assert (info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (32, 20, 20, 64)
    assert info.attention is AttentionKind.MHA and info.max_position_embeddings == 448
    assert close(info.param_count, 1.54e9, 0.01), info.param_count
    assert info.kv_bytes_per_token() == 2 * 32 * 20 * 64 * 2 == 163_840
    assert info.request_state_bytes() == 163_840 * 1500
    assert info.request_state_bytes("fp8") == 163_840 * 1500 // 2
    assert any("encoder-decoder" in n for n in info.notes)
    assert info.summary()["request_state_bytes"] == 245_760_000


def test_an_encoder_decoder_counts_its_decoder_layers_not_transformers_num_hidden_layers() -> None:
    """distil-whisper keeps 32 encoder layers and 2 decoder layers; transformers writes
    num_hidden_layers = 32 (the encoder's), which must not be read as the decoder's."""
    raw = json.loads((CONFIGS / "openai__whisper-large-v3.json").read_text())
    info = from_config({**raw, "decoder_layers": 2}, name="distil", source="config-file", path=None)
    assert info.num_layers == 2 and info.kv_bytes_per_token() == 2 * 2 * 20 * 64 * 2
    assert info.param_count < 0.9e9  # the 30 decoder layers' 787 M are gone
    with pytest.raises(ModelError, match="decoder_layers"):
        from_config({**raw, "decoder_layers": "2"}, name="bad", source="config-file", path=None)


def test_the_fit_counts_cross_attention_per_request_held() -> None:
    from tuner.model import fit

    info = load("openai__whisper-large-v3")
    common: dict = dict(vram_bytes_per_gpu=24 * 2**30, max_model_len=448)
    est = fit(info, **common, tokens_needed=64 * 448, requests=64)
    assert est.state_tokens_per_request == 1500
    assert est.tokens_needed == 64 * 448 + 64 * 1500
    plain = fit(load("meta-llama__Llama-3.1-8B-Instruct"), **common, tokens_needed=64 * 448)
    assert plain.state_tokens_per_request == 0 and plain.tokens_needed == 64 * 448
    assert est.max_concurrent_sequences == est.kv_tokens_fit // (448 + 1500)
    tp2 = fit(info, **common, tensor_parallel_size=2, tokens_needed=64 * 448, requests=64)
    assert tp2.state_tokens_per_request == 1500  # TP halves both the state and a token's KV


# vLLM's own calculator (model_executor/layers/mamba/mamba_utils.py), in a child process:
# the test process never imports torch.
_VLLM_STATE = """
import json, sys
from vllm.model_executor.layers.mamba.mamba_utils import MambaStateShapeCalculator as C
args = json.loads(sys.argv[1])
shapes = {
    "gdn": C.gated_delta_net_state_shape(1, *args["gdn"]),
    "mamba2": C.mamba2_state_shape(1, *args["mamba2"]),
}
out = {}
for name, parts in shapes.items():
    total = 0
    for shape in parts:
        n = 1
        for d in shape:
            n *= d
        total += n
    out[name] = total
print(json.dumps(out))
"""


def test_a_hybrids_recurrent_state_is_vllms_and_counted_per_request() -> None:
    """Qwen3-Coder-Next: 36 Gated DeltaNet layers keep a conv window and a 32 x 128 x 128
    state per request; the element counts equal the installed vLLM's own calculator's,
    for Gated DeltaNet and for Mamba-2 (Nemotron-H naming)."""
    import subprocess
    import sys

    from tuner.model import fit
    from tuner.model.hybrid_state import gated_delta_net_elements, mamba2_elements

    raw = json.loads((CONFIGS / "Qwen__Qwen3-Coder-Next.json").read_text())
    nemotron = {"mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128,
                "n_groups": 8, "conv_kernel": 4}  # fmt: skip
    args = {
        "gdn": [raw["linear_num_key_heads"], raw["linear_num_value_heads"],
                raw["linear_key_head_dim"], raw["linear_value_head_dim"],
                raw["linear_conv_kernel_dim"]],
        "mamba2": [128 * 64, 8, 128, 64, 128, 4],
    }  # fmt: skip
    done = subprocess.run([sys.executable, "-c", _VLLM_STATE, json.dumps(args)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    vllm = json.loads(done.stdout.strip().splitlines()[-1])
    assert gated_delta_net_elements(raw) == vllm["gdn"] == 3 * 8192 + 32 * 128 * 128
    assert mamba2_elements(nemotron) == vllm["mamba2"]

    info = load("Qwen__Qwen3-Coder-Next")
    assert info.recurrent_state_elements == 36 * vllm["gdn"]
    assert info.recurrent_state_bytes() == 36 * vllm["gdn"] * 2  # bfloat16
    assert any("MiB per request" in n for n in info.notes)
    est = fit(info, vram_bytes_per_gpu=192 * 2**30, max_model_len=8192,
              tokens_needed=64 * 1024, requests=64)  # fmt: skip
    per_token = info.kv_bytes_per_token()
    assert est.state_tokens_per_request == -(-info.recurrent_state_bytes() // per_token)
    assert est.tokens_needed == 64 * 1024 + 64 * est.state_tokens_per_request
    # Nemotron-H's pattern: only its 'M' layers keep a state ('-' are MLPs).
    llama = json.loads((CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json").read_text())
    hybrid = from_config({**llama, **nemotron, "hybrid_override_pattern": "M-M*" * 8},
                         name="h", source="config-file", path=None)  # fmt: skip
    assert hybrid.recurrent_state_elements == 16 * vllm["mamba2"]
