"""Attention-backend validity from vLLM's own classes (issue 27), and fixes that validate.

The facts come from ``tuner/vllm_tables/0.32.0.json``'s ``attention`` section, generated from
the installed vLLM's backend classes (``scripts/vllm_attention.py``; test_vllm_tables.py
regenerates it). Each class of refusal vLLM 0.32 applies at start — head size, GPU
architecture, KV-cache dtype, block size, MLA vs MHA — is checked on a published model config
from tests/data/hf-configs, with vLLM's own reason words; and no rule proposes a backend those
checks refuse.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_rules import AITER_ON, Case, case_id, check_case, model
from tuner.config import EngineConfig
from tuner.rules import Severity, Target, check
from tuner.vllm_tables import exact, table
from tuner.vllm_tables.attention import LayerFacts

MI300X = Target("0.32.0", "rocm", 8, 192.0, gpu_arch="gfx942", gpu_name="MI300X")
OLDER_MI300X = tuple(
    Target(v, "rocm", 8, 192.0, gpu_arch="gfx942", gpu_name="MI300X")
    for v in ("0.19.0", "0.24.0", "0.28.0")
)
MI300X_033 = Target("0.33.0", "rocm", 8, 192.0, gpu_arch="gfx942", gpu_name="MI300X")
MI250X = Target("0.32.0", "rocm", 8, 64.0, gpu_arch="gfx90a", gpu_name="MI250X")
FA = {"attention-backend": "ROCM_AITER_FA"}
H100 = Target("0.32.0", "cuda", 8, 80.0, gpu_arch="sm_90", gpu_name="H100")
A100 = Target("0.32.0", "cuda", 8, 80.0, gpu_arch="sm_80", gpu_name="A100")
B200 = Target("0.32.0", "cuda", 8, 178.4, gpu_arch="sm_100", gpu_name="B200")
T4 = Target("0.32.0", "cuda", 1, 15.0, gpu_arch="sm_75")  # no GPU-table name: the arch alone
INT8_HEAD = {"kv-cache-dtype": "int8_per_token_head"}
CPU = Target("0.32.0", "cpu", 1)

CASES = [
    Case("attention-backend-invalid", True, engine=FA, model="phi3", target=MI300X, id="head-96"),
    Case("attention-backend-invalid", True, engine=FA, target=MI250X, id="aiter-fa-on-gfx90a"),
    Case(
        "attention-backend-invalid",
        True,
        engine=FA,
        model="whisper",
        target=MI300X,
        id="encoder-decoder",
    ),
    Case(
        "attention-backend-invalid",
        True,
        engine={**FA, "kv-cache-dtype": "int8_per_token_head"},
        target=MI300X,
        fix={"attention-backend": None},
        id="per-token-head-kv",
    ),
    Case(
        "attention-backend-invalid",
        True,
        engine={"attention-backend": "ROCM_ATTN", "block-size": 1},
        target=MI300X,
        id="block-size-1",
    ),
    Case(
        "attention-backend-invalid",
        True,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        target=MI300X,
        severity=Severity.ERROR,
        id="mla-backend-for-mha",
    ),
    Case("attention-backend-invalid", False, engine=FA, target=MI300X, id="llama-head-128"),
    Case(
        "attention-backend-invalid",
        False,
        engine={"attention-backend": "ROCM_AITER_MLA", "block-size": 1},
        model="ds3",
        target=MI300X,
        id="aiter-mla-takes-block-1",
    ),
    Case(
        "attention-backend-invalid",
        False,
        engine=FA,
        model="phi3",
        target=Target("0.12.0", "rocm", 8, 192.0),
        id="no-table-for-0.12",
    ),
    Case(
        "attention-no-valid-backend",
        True,
        engine={"block-size": 1},
        target=MI300X,
        severity=Severity.ERROR,
        id="mha-block-1",
    ),
    Case(
        "attention-no-valid-backend",
        False,
        env=AITER_ON,
        engine={"block-size": 1},
        model="ds3",
        target=MI300X,
        id="aiter-mla-block-1",
    ),
    Case("attention-no-valid-backend", False, engine={"block-size": 16}, target=MI300X, id="16"),
    # CUDA: platforms/cuda.py's order, read statically (scripts/vllm_cuda_priorities.py).
    Case(
        "attention-backend-invalid",
        True,
        engine={"attention-backend": "FLASHMLA"},
        model="ds3",
        target=A100,
        severity=Severity.ERROR,
        id="cuda-flashmla-on-sm80",
    ),
    Case(
        "attention-backend-invalid",
        True,
        engine={"attention-backend": "FLASH_ATTN"},
        target=T4,
        id="cuda-fa-on-sm75",
    ),
    Case(
        "attention-backend-invalid",
        False,
        engine={"attention-backend": "FLASH_ATTN"},
        target=H100,
        id="cuda-fa-on-sm90",
    ),
    Case(
        "attention-no-valid-backend",
        True,
        engine={**INT8_HEAD, "block-size": 1},
        target=H100,
        severity=Severity.ERROR,
        id="cuda-nothing-takes-it",
    ),
    Case("attention-no-valid-backend", False, engine=INT8_HEAD, target=H100, id="cuda-triton"),
    Case(
        "attention-no-valid-backend",
        False,
        engine={"kv-cache-dtype": "fp8", "block-size": 1},
        target=H100,
        id="cuda-unreadable-flashinfer-is-unknown",
    ),
    # vLLM's SchedulerConfig refusals, read per release (scripts/vllm_config_checks.py).
    Case(
        "mbt-below-max-num-seqs",
        True,
        engine={"max-num-seqs": 64, "max-num-batched-tokens": 16},
        target=MI300X,
        severity=Severity.ERROR,
        fix={"max-num-batched-tokens": 64},
        id="both-set",
    ),
    Case(
        "mbt-below-max-num-seqs",
        False,
        engine={"max-num-batched-tokens": 16},
        target=MI300X,
        id="max-num-seqs-defaulted-is-clamped-by-vllm",
    ),
    Case(
        "mbt-below-max-num-seqs",
        False,
        engine={"max-num-seqs": 64, "max-num-batched-tokens": 16},
        target=Target("0.12.0", "rocm", 8, 192.0),
        id="no-table-for-0.12",
    ),
    # --quantization as vLLM's ModelConfig and the platform decide it (per release).
    Case(
        "quantization-unsupported-on-platform",
        True,
        engine={"quantization": "experts_int8"},
        target=MI300X,
        severity=Severity.ERROR,
        id="experts-int8-on-rocm",
    ),
    Case(
        "quantization-unsupported-on-platform",
        False,
        engine={"quantization": "fp8"},
        target=MI300X,
        id="fp8-on-rocm",
    ),
    Case(
        "quantization-unsupported-on-platform",
        False,
        engine={"quantization": "experts_int8"},
        target=Target("0.32.0", "cpu"),
        id="cpu-lists-none-so-takes-all",
    ),
    Case(
        "quantization-deprecated",
        True,
        engine={"quantization": "fbgemm_fp8"},
        target=MI300X,
        fix={"allow-deprecated-quantization": True},
        id="fbgemm-fp8",
    ),
    Case(
        "quantization-deprecated",
        False,
        engine={"quantization": "fbgemm_fp8", "allow-deprecated-quantization": True},
        target=MI300X,
        id="allowed",
    ),
    Case(
        "async-scheduling-speculative-method",
        True,
        engine={
            "async-scheduling": True,
            "speculative-config": {"method": "ngram", "num_speculative_tokens": 2},
        },
        target=MI300X,
        severity=Severity.ERROR,
        fix={"async-scheduling": None},
        id="ngram-cpu-method",
    ),
    Case(
        "async-scheduling-speculative-method",
        False,
        engine={
            "async-scheduling": True,
            "speculative-config": {"method": "eagle3", "num_speculative_tokens": 2},
        },
        target=MI300X,
        id="eagle3",
    ),
    Case(
        "async-scheduling-speculative-method",
        False,
        engine={"speculative-config": {"method": "ngram", "num_speculative_tokens": 2}},
        target=MI300X,
        id="unset-vllm-turns-it-off",
    ),
    # 0.33 refuses on the V1 model runner only: ngram runs on V2 unless V2 is switched off;
    # suffix is a method V2 lacks, so it runs (and is refused) on V1.
    Case(
        "async-scheduling-speculative-method",
        False,
        engine={
            "async-scheduling": True,
            "speculative-config": {"method": "ngram", "num_speculative_tokens": 2},
        },
        target=MI300X_033,
        id="033-ngram-on-the-v2-runner",
    ),
    Case(
        "async-scheduling-speculative-method",
        True,
        env={"VLLM_USE_V2_MODEL_RUNNER": "0"},
        engine={
            "async-scheduling": True,
            "speculative-config": {"method": "ngram", "num_speculative_tokens": 2},
        },
        target=MI300X_033,
        severity=Severity.ERROR,
        fix={"async-scheduling": None},
        id="033-ngram-v2-runner-off",
    ),
    Case(
        "async-scheduling-speculative-method",
        True,
        engine={
            "async-scheduling": True,
            "speculative-config": {"method": "suffix", "num_speculative_tokens": 2},
        },
        target=MI300X_033,
        severity=Severity.ERROR,
        fix={"async-scheduling": None},
        id="033-suffix-runs-on-v1",
    ),
    # The platform classes' overrides (the table's ``platforms``, scripts/vllm_platforms.py).
    Case(
        "platform-overrides-value",
        True,
        engine={"attention-backend": "TORCH_SDPA"},
        target=CPU,
        severity=Severity.WARNING,
        fix={"attention-backend": None},
        id="cpu-runs-cpu-attn",
    ),
    Case(
        "platform-overrides-value",
        True,
        engine={"cudagraph-mode": "FULL"},
        target=CPU,
        severity=Severity.WARNING,
        fix={"cudagraph-mode": None},
        id="cpu-has-no-static-graphs",
    ),
    Case("platform-overrides-value", False, engine={"attention-backend": "CPU_ATTN"}, target=CPU),
    Case(  # a CUDA backend on CPU: attention-backend-unavailable's error says it, once
        "platform-overrides-value",
        False,
        engine={"attention-backend": "FLASH_ATTN"},
        target=CPU,
        id="other-platforms-backend",
    ),
    Case("platform-overrides-value", False, engine={"cudagraph-mode": "FULL"}, target=MI300X),
]


def test_platform_overrides_are_the_platform_classes_words() -> None:
    release = table("0.32.0")
    assert release.platforms["cpu"]["static_graphs"] is False
    assert release.platforms["rocm"]["static_graphs"] is True
    assert release.platforms["cuda"]["static_graphs"] is True
    assert set(release.platforms["cpu"]["attention_backends"]) >= {"CPU_ATTN"}
    said = release.platform_override("attention-backend", "TORCH_SDPA", "cpu")
    assert said is not None and '"Cannot use TORCH_SDPA backend on CPU."' in said
    assert release.platform_override("attention-backend", "ROCM_ATTN", "rocm") is None
    assert release.platform_default("cudagraph-mode", "cpu") == "NONE"
    assert release.platform_default("cudagraph-mode", "rocm") is None


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case: Case) -> None:
    check_case(case)


def _finding(config: EngineConfig, name: str, target: Target, rule: str) -> Any:
    found = [f for f in check(config, model(name), target) if f.rule == rule]
    return found[0] if found else None


def test_refusals_quote_vllms_reason_and_the_value_seen() -> None:
    hit = _finding(EngineConfig("m", engine=FA), "phi3", MI300X, "attention-backend-invalid")
    assert "head_size not supported (96; it takes 64, 128, 256)" in hit.message
    assert "vLLM picks ROCM_ATTN" in hit.message and hit.fix == {"attention-backend": None}
    hit = _finding(EngineConfig("m", engine=FA), "llama8b", MI250X, "attention-backend-invalid")
    assert "compute capability not supported (gfx90a)" in hit.message


def test_no_rule_proposes_a_backend_vllm_refuses() -> None:
    """Every fix, across models, archs, KV dtypes and AITER states, validates on the table."""
    from tuner.rules.backend_facts import attention_table, layer_facts
    from tuner.rules.base import Context

    envs = [{}, AITER_ON, {**AITER_ON, "VLLM_ROCM_USE_AITER_MHA": "0"}]
    engines: list[dict[str, Any]] = [{}, {"kv-cache-dtype": "int8_per_token_head"}]
    engines += [{"max-model-len": 200000}, {"kv-cache-dtype": "fp8"}]
    checked = 0
    for name in ("phi3", "llama8b", "oss", "ds3", "qwen3moe"):
        for target in (MI300X, MI250X, *OLDER_MI300X):
            for env in envs:
                for engine in engines:
                    config = EngineConfig("m", env=dict(env), engine=dict(engine))
                    for f in check(config, model(name), target):
                        backend = (f.fix or {}).get("attention-backend")
                        if not backend:
                            continue
                        fixed = Context(config.with_values(f.fix), model(name), target, None)
                        tbl, facts = attention_table(fixed), layer_facts(fixed)
                        assert tbl is not None and facts is not None
                        reasons = tbl.invalid_reasons(backend, facts)
                        assert not reasons, (name, target.gpu_arch, env, engine, f.rule, reasons)
                        checked += 1
    assert checked > 10  # the sweep reached fixes that set a backend


@pytest.mark.parametrize("target", OLDER_MI300X, ids=lambda t: t.vllm_version)
def test_an_older_release_is_checked_on_its_own_table(target: Target) -> None:
    # Each release line from 0.19 has its own generated table: AITER FA's head sizes and
    # gfx90a refusal are read from that release, not from the newest one.
    tbl = exact(target.vllm_version)
    assert tbl is not None and tbl.version == target.vllm_version
    hit = _finding(EngineConfig("m", engine=FA), "phi3", target, "attention-backend-invalid")
    assert hit is not None and "head_size not supported (96" in hit.message
    mi250x = Target(target.vllm_version, "rocm", 8, 64.0, gpu_arch="gfx90a", gpu_name="MI250X")
    hit = _finding(EngineConfig("m", engine=FA), "llama8b", mi250x, "attention-backend-invalid")
    assert hit is not None and "compute capability not supported (gfx90a)" in hit.message


def test_phi3_on_mi300x_is_told_about_rocm_attn_without_an_aiter_fa_fix() -> None:
    config = EngineConfig("m", env=dict(AITER_ON))
    found = check(config, model("phi3"), MI300X)
    assert not [f for f in found if f.severity is Severity.ERROR], found
    hit = next(f for f in found if f.rule == "rocm-attn-default-backend")
    assert hit.fix is None and "ROCM_AITER_FA is no alternative" in hit.message


def test_the_rocm_walk_matches_vllms_priority_order() -> None:
    """vLLM 0.32's ROCm list (platforms/rocm.py): ROCM_ATTN first; sinks skip it to AITER FA."""
    att = table("0.32.0").attention
    assert att is not None
    llama = LayerFacts(head_size=128)
    picked, _ = att.rocm_choice(llama, aiter_mha=True, aiter_mla=True, aiter_supported=True)
    assert picked == "ROCM_ATTN"
    sinks = LayerFacts(head_size=64, sink=True)
    picked, passed = att.rocm_choice(sinks, aiter_mha=True, aiter_mla=True, aiter_supported=True)
    assert picked == "ROCM_AITER_FA" and "attention sinks not supported" in passed["ROCM_ATTN"]
    picked, _ = att.rocm_choice(sinks, aiter_mha=False, aiter_mla=False, aiter_supported=True)
    assert picked == "ROCM_AITER_UNIFIED_ATTN"
    turbo = LayerFacts(head_size=128, kv_cache_dtype="turboquant_4bit_nc")
    picked, _ = att.rocm_choice(turbo, aiter_mha=True, aiter_mla=True, aiter_supported=True)
    assert picked == "TURBOQUANT"


def test_unknown_values_and_unreadable_backends_are_never_refused() -> None:
    att = table("0.32.0").attention
    assert att is not None
    odd = LayerFacts(head_size=100, block_size=24)  # never probed: unknown, not refused
    assert att.invalid_reasons("ROCM_AITER_FA", odd) == []
    assert att.invalid_reasons("FLASHINFER", LayerFacts(head_size=128)) is None
    assert att.invalid_reasons("NO_SUCH_BACKEND", odd) is None
    assert exact("0.12.0") is None and exact("0.32.5") is not None


def test_scheduler_refusals_quote_vllm_and_a_cpu_check_agrees() -> None:
    """The sentence is vLLM 0.32's own (the CPU engine's log says the same at start:
    tests/data/vllm-logs/cpu-0.32-mbt-below-max-num-seqs.log)."""
    from pathlib import Path

    config = EngineConfig("m", engine={"max-num-seqs": 64, "max-num-batched-tokens": 16})
    hit = _finding(config, "llama8b", Target("0.32.0", "cpu"), "mbt-below-max-num-seqs")
    said = "max_num_batched_tokens (16) must be greater than or equal to max_num_seqs (64)."
    assert said in hit.message
    log = Path(__file__).parent / "data" / "vllm-logs" / "cpu-0.32-mbt-below-max-num-seqs.log"
    assert said in log.read_text()
    config = EngineConfig(
        "m",
        engine={"enable-chunked-prefill": False, "max-num-batched-tokens": 1024},
    )
    hit = _finding(config, "llama8b", MI300X, "chunked-prefill-off-mbt")
    assert "max_num_batched_tokens (1024) is smaller than max_model_len (131072)" in hit.message


def test_memory_fit_counts_an_encoder_decoders_cross_attention_per_request() -> None:
    """Whisper large-v3, 64 requests of 400 tokens on a 24 GiB CPX partition: the decoder's
    25,600 tokens fit, but each request also holds 1,500 positions of cross-attention K/V
    (issue 27: vLLM's CrossAttentionSpec), so the workload asks for 121,600 and queues."""
    from tuner.rules import WorkloadShape

    cpx = Target("0.32.0", "rocm", 8, 24.0, gpu_arch="gfx942", gpu_name="MI300X-CPX")
    shape = WorkloadShape(input_len=200, output_len=200, concurrency=64)
    found = [
        f
        for f in check(EngineConfig(model="whisper"), model("whisper"), cpx, shape)
        if f.rule == "memory-fit"
    ]
    assert len(found) == 1 and found[0].severity is Severity.WARNING
    assert "asks for 121,600" in found[0].message and "1,500 of cross-attention" in found[0].message
    fewer = WorkloadShape(input_len=200, output_len=200, concurrency=16)
    assert not [
        f
        for f in check(EngineConfig(model="whisper"), model("whisper"), cpx, fewer)
        if f.rule == "memory-fit"
    ]


@pytest.mark.parametrize(
    ("target", "name", "engine", "picked"),
    [
        (H100, "llama8b", {}, "FLASH_ATTN"),  # first in CUDA's list below SM100 and takes it
        (H100, "llama8b", INT8_HEAD, "TRITON_ATTN"),  # FA and FlashInfer refuse that KV dtype
        (B200, "llama8b", {}, None),  # FlashInfer first on SM100: unreadable here, so unknown
        (H100, "llama8b", {"kv-cache-dtype": "fp8"}, None),  # FA refuses fp8; FlashInfer unknown
    ],
)
def test_the_backend_vllm_on_cuda_picks(
    target: Target, name: str, engine: dict[str, Any], picked: str | None
) -> None:
    from tuner.rules.base import Context

    ctx = Context(EngineConfig(model=name, engine=engine), model(name), target, None)
    assert ctx.effective_backend() == picked


def test_cuda_orders_for_values_never_probed_are_unknown() -> None:
    release = exact("0.32.0")
    assert release is not None and release.attention is not None
    att = release.attention
    mla = LayerFacts(head_size=576, mla=True, cuda_capability="10.0", num_heads=128)
    assert att.cuda_order(mla) is not None
    assert (
        att.cuda_order(LayerFacts(head_size=576, mla=True, cuda_capability="10.0", num_heads=33))
        is None
    )
    assert att.cuda_order(LayerFacts(head_size=128, cuda_capability="11.0")) is None
    assert att.cuda_order(LayerFacts(head_size=128, cuda_capability="9.0"))[0] == "FLASH_ATTN"
