"""Exports tell the truth (issue 32): the arm's representative and mean, and what vLLM ran.

After an A/B the export used to suggest the winning arm's last (or luckiest)
repeat and headline its own figure; a trial whose request vLLM overrode was
exported with the request and no word. Here the stored trials are real shapes
(the vLLM 0.32 CPU log excerpt in tests/data/vllm-logs/ gives the overrides);
the export goes through the same functions the TUI's export dialog and
``tunelab export`` call.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import effective
from tuner.export.trial import preset_from_trial
from tuner.lab.study import Study, export_trial
from tuner.studies.ab import build_report
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

LOGS = Path(__file__).parent / "data" / "vllm-logs"
WL = Workload(input_len=16, output_len=16, num_prompts=8)


def _trial(seqs: int, value: float, arm: str, repeat: int, **engine: object) -> Trial:
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": seqs, **engine}),
        workload=WL,
        study="s",
        status=TrialStatus.DONE,
        results={"output_throughput": value, "completed": 8, "failed": 0},
        arm=arm,
        repeat=repeat,
        tags={"kind": "ab"},
    )


def test_after_an_ab_the_export_is_the_arm_representative_and_headlines_its_mean(
    tmp_path: Path,
) -> None:
    # B's repeats: 1,000, 1,100 and one lucky 1,900 (mean 1,333): B is clearly better
    # than A (~500) and the export must not sell the 1,900.
    a = [_trial(1, v, "A", i) for i, v in enumerate((500.0, 510.0, 490.0))]
    b = [_trial(8, v, "B", i) for i, v in enumerate((1000.0, 1100.0, 1900.0))]
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        for t in a + b:
            store.save(t)
        study = Study(store, "s")
        study.remember_ab(build_report(a + b, study="s", objective="output_throughput"))
        chosen, why = study.export_choice()
    assert chosen is not None and chosen.id == b[1].id, why  # 1,100: nearest the mean, not the last
    assert "repeat nearest the arm's mean of 3" in why and "B (significantly better)" in why
    preset = preset_from_trial(chosen.id, store_path=db)
    results = preset.results or {}
    assert results["objective_value"] == (1000.0 + 1900.0 + 1100.0) / 3
    assert results["trial_objective_value"] == 1100.0
    assert results["noise"]["repeats"] == 3 and results["noise"]["max"] == 1900.0
    assert f"the other figures are trial {chosen.short_id}'s own" in results["measured"]
    # `presets verify` reads the same reference (the noise table's mean and spread).
    written = export_trial(chosen, tmp_path / "out", ["toml"], store_path=db)
    doc = tomllib.loads(written[0].read_text())
    assert doc["results"]["objective_value"] == results["objective_value"]


def test_a_request_vllm_overrode_is_named_atop_every_exported_file(tmp_path: Path) -> None:
    requested = {**DEMO_ENGINE_ARGS, "attention-backend": "TORCH_SDPA", "cudagraph-mode": "FULL"}
    ran = effective.compare(
        requested,
        effective.parse_log((LOGS / "cpu-0.32-default.log").read_text().splitlines(), "CPU_ATTN"),
    )
    assert {m.knob for m in ran.mismatches} == {"attention-backend", "cudagraph-mode"}
    trial = Trial(
        config=EngineConfig(model="m", engine=requested),
        workload=WL,
        study="s",
        status=TrialStatus.DONE,
        results={"output_throughput": 100.0},
        effective=ran.to_dict(),
    )
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        store.save(trial)
    formats = ["toml", "sh", "yaml", "docker"]
    files = export_trial(trial, tmp_path / "out", formats, store_path=db)
    assert len(files) == 4
    for path in files:
        head = "\n".join(
            line for line in path.read_text().splitlines()[:30] if line.startswith("#")
        )
        for m in ran.mismatches:
            line = f"ran {m.knob}={m.effective} where this preset asks {m.requested}"
            assert line in head, (path.name, head)
    toml = next(p for p in files if p.suffix == ".toml")
    doc = tomllib.loads(toml.read_text())
    # The request is kept (another node may honour it); the table says what this one ran.
    assert doc["engine"]["attention-backend"] == "TORCH_SDPA"
    assert doc["results"]["ran"]["attention-backend"] == {
        "requested": "TORCH_SDPA",
        "ran": "CPU_ATTN",
        "vllm": "v0.32.0",
    }
