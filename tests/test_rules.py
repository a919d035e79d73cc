"""AITER, attention and CUDA-graph rules, each shown firing and silent (the rest: test_rules_more).

Each case names the rule, a config, a model, a target and a workload; the
"fires" cases also check the severity and, where the rule offers one, the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tuner.config import EngineConfig
from tuner.model import ModelInfo, analyze
from tuner.rules import Severity, Target, WorkloadShape, check

CONFIGS = Path(__file__).parent / "data" / "hf-configs"


@cache
def model(name: str) -> ModelInfo:
    files = {
        "llama8b": "meta-llama__Llama-3.1-8B-Instruct",
        "llama70b": "meta-llama__Llama-3.1-70B-Instruct",
        "ds3": "deepseek-ai__DeepSeek-V3",
        "ds2lite": "deepseek-ai__DeepSeek-V2-Lite-Chat",
        "oss": "openai__gpt-oss-20b",
        "mixtral": "mistralai__Mixtral-8x7B-Instruct-v0.1",
        "qwen3moe": "Qwen__Qwen3-30B-A3B",
        "qwen3fp8": "Qwen__Qwen3-30B-A3B-FP8",
        "phi3": "microsoft__Phi-3-mini-4k-instruct",
        "whisper": "openai__whisper-large-v3",
    }
    return analyze(str(CONFIGS / f"{files[name]}.json"))


def ultra_sparse() -> ModelInfo:
    """A Maverick-shaped MoE (128 experts, 1 per token: 0.78%) built from the Mixtral config."""
    import json

    from tuner.model import from_config

    cfg = json.loads((CONFIGS / "mistralai__Mixtral-8x7B-Instruct-v0.1.json").read_text())
    cfg.update(num_local_experts=128, num_experts_per_tok=1)
    return from_config(cfg, name="maverick-shaped", source="config-file", path=None)


ROCM_OLD = Target("0.10.2", "rocm", 8, 192.0)
ROCM_012 = Target("0.12.0", "rocm", 8, 192.0)
ROCM_NEW = Target("0.32.0", "rocm", 8, 192.0)
ROCM_018 = Target("0.18.0", "rocm", 8, 192.0)
ROCM_ANY = Target(None, "rocm", 8, 192.0)
ROCM_1 = Target("0.12.0", "rocm", 1, 192.0)
CUDA = Target("0.12.0", "cuda", 8, 80.0)
CPU = Target("0.32.0", "cpu", 1, None)


@dataclass
class Case:
    rule: str
    fires: bool
    env: dict[str, str] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    model: str | None = "llama8b"
    target: Target = ROCM_012
    workload: WorkloadShape | None = None
    severity: Severity | None = None
    fix: dict[str, Any] | None = None
    id: str = ""


AITER_ON = {"VLLM_ROCM_USE_AITER": "1"}

CASES = [
    # -- AITER ---------------------------------------------------------------
    Case(
        "aiter-subflag-without-master",
        True,
        env={"VLLM_ROCM_USE_AITER_MOE": "1"},
        severity=Severity.WARNING,
        fix={"VLLM_ROCM_USE_AITER": "1"},
        id="subflag-master-off",
    ),
    Case(
        "aiter-subflag-without-master",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "1"},
        id="master-on",
    ),
    Case(
        "aiter-subflag-without-master",
        False,
        env={"VLLM_ROCM_USE_AITER_MOE": "0"},
        id="subflag-off",
    ),
    Case(
        "aiter-online-tune-before-disabling-moe",
        True,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "0"},
        model="mixtral",
        severity=Severity.ADVICE,
        fix={"AITER_ONLINE_TUNE": "1", "VLLM_ROCM_USE_AITER_MOE": None},
    ),
    Case(
        "aiter-online-tune-before-disabling-moe",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "0", "AITER_ONLINE_TUNE": "1"},
        model="mixtral",
        id="tune-set",
    ),
    Case(
        "aiter-online-tune-before-disabling-moe",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MOE": "0"},
        model="llama8b",
        id="dense-model",
    ),
    Case(
        "aiter-fp8-kv-cache",
        True,
        env=AITER_ON,
        engine={"kv-cache-dtype": "fp8"},
        target=Target("0.9.1", "rocm", 1, 192.0),
        severity=Severity.ERROR,
        fix={"kv-cache-dtype": "auto"},
    ),
    Case(
        "aiter-fp8-kv-cache",
        True,
        env=AITER_ON,
        engine={"kv-cache-dtype": "fp8"},
        target=ROCM_ANY,
        severity=Severity.WARNING,
        id="unknown-version-warns",
    ),
    Case(
        "aiter-fp8-kv-cache",
        False,
        env=AITER_ON,
        engine={"kv-cache-dtype": "fp8"},
        target=ROCM_012,
        id="fixed-in-0.10",
    ),
    Case(
        "aiter-fp8-kv-cache",
        False,
        engine={"kv-cache-dtype": "fp8"},
        target=Target("0.9.1", "rocm"),
        id="aiter-off",
    ),
    Case(
        "shuffle-kv-layout",
        True,
        env=AITER_ON,
        workload=WorkloadShape(1024, 256, 64),
        target=ROCM_018,
        severity=Severity.ADVICE,
        fix={"VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env=AITER_ON,
        workload=WorkloadShape(1024, 256, 8),
        target=ROCM_018,
        id="low-concurrency",
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_MHA": "0"},
        target=ROCM_018,
        workload=WorkloadShape(1024, 256, 64),
        id="not-aiter-fa",
    ),
    Case(
        "shuffle-kv-layout",
        False,
        env=AITER_ON,
        workload=WorkloadShape(1024, 256, 64),
        target=ROCM_012,
        id="flag-not-yet-in-0.12",
    ),
    Case(
        "shuffle-kv-layout",
        True,
        env={**AITER_ON, "VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": "1"},
        model="oss",
        severity=Severity.ERROR,
        fix={"VLLM_ROCM_SHUFFLE_KV_CACHE_LAYOUT": None},
        id="sliding-window-breaks",
    ),
    # -- attention -------------------------------------------------------------
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "ROCM_AITER_FA"},
        target=CUDA,
        severity=Severity.ERROR,
        id="rocm-backend-on-cuda",
    ),
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "ROCM_AITER_UNIFIED_ATTN"},
        target=ROCM_OLD,
        severity=Severity.ERROR,
        id="not-yet-in-0.10",
    ),
    Case(
        "attention-backend-unavailable",
        True,
        engine={"attention-backend": "NO_SUCH_BACKEND"},
        severity=Severity.ERROR,
        id="unknown-name",
    ),
    Case(
        "attention-backend-unavailable",
        False,
        engine={"attention-backend": "ROCM_AITER_FA"},
        target=ROCM_012,
    ),
    Case(
        "attention-backend-vs-mla",
        True,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        model="llama8b",
        severity=Severity.ERROR,
        fix={"attention-backend": None},
        id="mla-backend-dense-model",
    ),
    Case(
        "attention-backend-vs-mla",
        True,
        engine={"attention-backend": "ROCM_AITER_FA"},
        model="ds3",
        severity=Severity.ERROR,
        fix={"attention-backend": "ROCM_AITER_MLA"},
        id="mha-backend-mla-model",
    ),
    Case(
        "attention-backend-vs-mla",
        False,
        engine={"attention-backend": "ROCM_AITER_MLA"},
        model="ds3",
    ),
    Case(
        "aiter-mla-block-size",
        True,
        env=AITER_ON,
        model="ds3",
        target=ROCM_OLD,
        severity=Severity.ERROR,
        fix={"block-size": 1},
    ),
    Case(
        "aiter-mla-block-size",
        True,
        engine={"attention-backend": "ROCM_AITER_MLA", "block-size": 16},
        model="ds3",
        target=ROCM_ANY,
        severity=Severity.WARNING,
        id="unknown-version",
    ),
    Case(
        "aiter-mla-block-size",
        False,
        env=AITER_ON,
        engine={"block-size": 1},
        model="ds3",
        target=ROCM_OLD,
        id="block-1",
    ),
    Case(
        "aiter-mla-block-size",
        False,
        env=AITER_ON,
        model="ds3",
        target=ROCM_012,
        id="lifted-in-0.11.1",
    ),
    Case(
        "aiter-mla-block-size", False, env=AITER_ON, model="llama8b", target=ROCM_OLD, id="not-mla"
    ),
    # 0.11.1-0.18 check unified attention before MHA ("Priority 1 ... must check before
    # MHA"): AITER MHA left on does not matter there (tunelab used to warn).
    Case(
        "aiter-unified-attention",
        False,
        env={**AITER_ON, "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1"},
        target=ROCM_012,
        id="mha-on-unified-checked-first",
    ),
    Case(
        "aiter-unified-attention",
        True,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_MHA": "0",
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
        },
        target=ROCM_NEW,
        severity=Severity.WARNING,
        fix={
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": None,
            "attention-backend": "ROCM_AITER_UNIFIED_ATTN",
            "VLLM_ROCM_USE_AITER": "1",
        },
        id="env-ignored-in-new-vllm",
    ),
    Case(
        "aiter-unified-attention",
        True,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_MHA": "0",
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
            "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1",
        },
        target=ROCM_ANY,
        severity=Severity.WARNING,
        fix={"VLLM_V1_USE_PREFILL_DECODE_ATTENTION": None},
        id="prefill-decode-on-unknown-version",
    ),
    Case(
        "aiter-unified-attention",
        False,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
            "VLLM_V1_USE_PREFILL_DECODE_ATTENTION": "1",
        },
        target=ROCM_012,
        id="prefill-decode-after-unified-in-012",
    ),
    Case(
        "aiter-unified-attention",
        False,
        env={
            **AITER_ON,
            "VLLM_ROCM_USE_AITER_MHA": "0",
            "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION": "1",
        },
        target=ROCM_012,
        id="correct-trio",
    ),
    Case(
        "gpt-oss-unified-attention",
        True,
        env=AITER_ON,
        model="oss",
        target=ROCM_012,
        severity=Severity.ADVICE,
        fix={"VLLM_ROCM_USE_AITER": "1", "attention-backend": "ROCM_AITER_UNIFIED_ATTN"},
    ),
    Case(
        "gpt-oss-unified-attention",
        True,
        model="oss",
        target=ROCM_OLD,
        severity=Severity.ADVICE,
        id="old-vllm-says-upgrade",
    ),
    Case(
        "gpt-oss-unified-attention",
        False,
        env=AITER_ON,
        engine={"attention-backend": "ROCM_AITER_UNIFIED_ATTN"},
        model="oss",
        target=ROCM_012,
    ),
    Case("gpt-oss-unified-attention", False, env=AITER_ON, model="llama8b", id="not-gpt-oss"),
    # -- CUDA graphs -----------------------------------------------------------
    Case(
        "cudagraph-mode-vs-backend",
        True,
        engine={"cudagraph-mode": "FULL"},
        model="ds3",
        target=ROCM_012,
        severity=Severity.ERROR,
        fix={"cudagraph-mode": "PIECEWISE"},
        id="triton-mla-full",
    ),
    Case(
        "cudagraph-mode-vs-backend",
        True,
        engine={"cudagraph-mode": "FULL_AND_PIECEWISE"},
        model="ds3",
        target=ROCM_012,
        severity=Severity.WARNING,
        fix={"cudagraph-mode": "PIECEWISE"},
        id="triton-mla-downgraded",
    ),
    Case(
        "cudagraph-mode-vs-backend",
        True,
        env=AITER_ON,
        engine={"cudagraph-mode": "FULL"},
        target=ROCM_012,
        severity=Severity.WARNING,
        fix={"cudagraph-mode": "FULL_AND_PIECEWISE"},
        id="aiter-fa-uniform-only",
    ),
    Case(
        "cudagraph-mode-vs-backend",
        False,
        engine={"cudagraph-mode": "PIECEWISE"},
        model="ds3",
        target=ROCM_012,
    ),
    Case(
        "cudagraph-mode-vs-backend",
        False,
        engine={"cudagraph-mode": "FULL"},
        target=ROCM_012,
        id="triton-unified-full-ok",
    ),
    Case(
        "cudagraph-mode-with-enforce-eager",
        True,
        engine={"cudagraph-mode": "FULL", "enforce-eager": True},
        severity=Severity.WARNING,
    ),
    Case("cudagraph-mode-with-enforce-eager", False, engine={"cudagraph-mode": "FULL"}),
]


def case_id(case: Case) -> str:
    return f"{case.rule}-{'fires' if case.fires else 'silent'}" + (f"-{case.id}" if case.id else "")


# Models built from a published config with a few keys changed (name -> builder);
# test modules add theirs (tests/test_rules_knowledge.py).
DERIVED: dict[str, Callable[[], ModelInfo]] = {}


def run(case: Case) -> list[Any]:
    info = None
    if case.model == "ultra":
        info = ultra_sparse()
    elif case.model in DERIVED:
        info = DERIVED[case.model]()
    elif case.model:
        info = model(case.model)
    config = EngineConfig(model="m", env=dict(case.env), engine=dict(case.engine))
    return check(config, info, case.target, case.workload)


def check_case(case: Case) -> None:
    """Runs one case and checks it fired (severity, fix) or stayed silent."""
    found = run(case)
    assert not [f for f in found if f.rule == "internal-error"], found
    mine = [f for f in found if f.rule == case.rule]
    if not case.fires:
        assert mine == [], mine
        return
    assert mine, f"{case.rule} did not fire; got {[f.rule for f in found]}"
    hit = mine[0]
    assert hit.message and hit.source and hit.knobs
    if case.severity is not None:
        assert hit.severity is case.severity, hit
    if case.fix is not None:
        assert hit.fix == case.fix, hit
    if case.id == "old-vllm-says-upgrade":
        assert hit.fix is None and "upgrade" in hit.message


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_rule(case: Case) -> None:
    check_case(case)


def test_rules_cite_a_reference_section() -> None:
    from tests.test_rules_more import CASES as MORE

    for case in CASES + MORE:
        if case.fires:
            for finding in run(case):
                if finding.rule == case.rule and "tunelab" not in finding.source:
                    assert "§" in finding.source or "vllm" in finding.source.lower(), finding
