"""Memory fit under expert and data parallelism, Llama 4's MoE layout, vLLM's memory default.

Issue 14 item 1: DeepSeek-V3 at DP 8 + EP on eight MI300X (reference 001 §Data
Parallel Attention (advanced), the guide's own high-concurrency recipe) must
fit; without EP each DP rank holds all 671 B parameters and must not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_rules import Case, case_id, check_case, model
from tuner.config import EngineConfig
from tuner.model import GIB, fit, from_config
from tuner.model.fit import weights_per_gpu
from tuner.rules import Severity, Target, WorkloadShape, check

MI300X_032 = Target("0.32.0", "rocm", 8, 192.0)
DP8_EP = {"data-parallel-size": 8, "enable-expert-parallel": True}
HIGH_CONCURRENCY = WorkloadShape(1024, 1024, 2048, "offline")


def maverick(step: int = 2, experts: int = 128) -> dict:
    """Llama-4 Maverick's published text config (Scout: 16 experts, step 1)."""
    text = {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_local_experts": experts,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": step,
        "vocab_size": 202048,
        "max_position_embeddings": 1048576,
    }
    return {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "torch_dtype": "bfloat16",
        "text_config": text,
    }


CASES = [
    Case(
        "memory-fit",
        False,
        engine=DP8_EP,
        model="ds3",
        target=MI300X_032,
        workload=HIGH_CONCURRENCY,
        id="ds3-dp8-ep",
    ),
    Case(
        "memory-fit",
        True,
        engine={"data-parallel-size": 8},
        model="ds3",
        target=MI300X_032,
        severity=Severity.ERROR,
        fix={"enable-expert-parallel": True},
        id="ds3-dp8-without-ep",
    ),
    Case(
        "memory-fit",
        False,
        engine={"tensor-parallel-size": 8, "enable-expert-parallel": True},
        model="ds3",
        target=MI300X_032,
        workload=WorkloadShape(1024, 1024, 128, "interactive"),
        id="ds3-tp8-ep",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case: Case) -> None:
    check_case(case)


def test_ds3_dp8_ep_is_no_error_without_a_workload() -> None:
    config = EngineConfig(model="m", engine=dict(DP8_EP))
    found = [f for f in check(config, model("ds3"), MI300X_032) if f.rule == "memory-fit"]
    assert all(f.severity is not Severity.ERROR for f in found), found


def test_ep_shards_only_the_routed_experts_over_tp_times_dp() -> None:
    ds3 = model("ds3")
    assert 0.95 < ds3.routed_expert_share < 0.99  # 256 routed experts x 58 layers
    whole = weights_per_gpu(ds3, data_parallel_size=8)
    sharded = weights_per_gpu(ds3, data_parallel_size=8, expert_parallel=True)
    routed = ds3.weight_bytes * ds3.routed_expert_share
    assert whole == pytest.approx(ds3.weight_bytes, rel=1e-6)
    assert sharded == pytest.approx(ds3.weight_bytes - routed + routed / 8, rel=1e-6)
    # EP on a dense model changes nothing: there are no routed experts to split.
    llama = model("llama8b")
    assert llama.routed_expert_share == 0
    assert weights_per_gpu(llama, data_parallel_size=8, expert_parallel=True) == llama.weight_bytes


def test_dp_divides_the_workload_kv_demand() -> None:
    llama = model("llama8b")
    one = fit(llama, vram_bytes_per_gpu=192 * GIB, max_model_len=8192, tokens_needed=800_000)
    eight = fit(
        llama,
        vram_bytes_per_gpu=192 * GIB,
        max_model_len=8192,
        tokens_needed=800_000,
        data_parallel_size=8,
    )
    assert eight.tokens_needed == 100_000 and one.tokens_needed == 800_000
    assert eight.fits


def test_workload_length_is_used_in_the_sequences_message() -> None:
    config = EngineConfig(model="m", engine={"max-model-len": 32768})
    found = check(
        config,
        model("llama8b"),
        Target("0.12.0", "rocm", 1, 192.0),
        WorkloadShape(30000, 2000, 512),
    )
    hit = next(f for f in found if f.rule == "memory-fit")
    assert "32,000 tokens" in hit.message and "workload-length" in hit.message


def test_utilization_default_follows_the_target_release() -> None:
    config = EngineConfig(model="m", engine={"tensor-parallel-size": 1})
    msgs = {}
    for version in ("0.12.0", "0.32.0"):
        found = check(config, model("llama70b"), Target(version, "rocm", 1, 80.0))
        msgs[version] = next(f for f in found if f.rule == "memory-fit").message
    assert "x 0.9)" in msgs["0.12.0"] and "x 0.92)" in msgs["0.32.0"]


def test_llama4_interleaved_moe_layers_and_shared_expert() -> None:
    mav = from_config(maverick(), name="maverick", source="config-file", path=None)
    scout = from_config(maverick(1, 16), name="scout", source="config-file", path=None)
    assert mav.moe is not None and mav.moe.moe_layers == 24 and mav.moe.shared_experts == 1
    assert scout.moe is not None and scout.moe.moe_layers == 48
    # Published sizes: Maverick 400 B total / 17 B active, Scout 109 B (text part ~108 B) / 17 B.
    assert mav.param_count / 1e9 == pytest.approx(400, rel=0.02)
    assert mav.active_param_count / 1e9 == pytest.approx(17, rel=0.03)
    assert scout.param_count / 1e9 == pytest.approx(108, rel=0.02)


def test_model_info_and_params_do_not_import_each_other() -> None:
    root = Path(__file__).parent.parent / "tuner" / "model"

    def imports(name: str) -> set[str]:
        tree = ast.parse((root / name).read_text())
        return {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}

    assert "tuner.model.info" not in imports("params.py")
    assert "tuner.model.info" not in imports("moe.py")
    assert "tuner.model.moe" in imports("params.py") and "tuner.model.moe" in imports("info.py")
