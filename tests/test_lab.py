"""The application layer (tuner.lab): one answer per decision, kept where it must survive.

These are the decisions the CLI and the TUI both render; each test pins the
rule the faces used to disagree about.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from tuner.bench.workload import Workload, WorkloadError
from tuner.config import EngineConfig
from tuner.lab.config import ConfigInputError, build_config
from tuner.lab.study import BaselineChoice, ComparisonSource, Study
from tuner.lab.target import for_check, with_node_gpus
from tuner.lab.values import ValueTextError, parse_bool, parse_fraction, parse_rate
from tuner.lab.workload import shape_for_check, workload_from_texts, workload_texts
from tuner.rules import Target
from tuner.studies.ab import build_report
from tuner.studies.stats import Verdict
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

W = Workload(input_len=32, output_len=16, num_prompts=8, concurrency=4)


def _trial(mns: int, tput: float, study: str = "s", **kw: object) -> Trial:
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": mns}),
        workload=W,
        study=study,
        status=TrialStatus.DONE,
        results={"output_throughput": tput, "completed": 8},
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("text", ["inf", "Infinity", " INF ", ""])
def test_one_rate_parser_takes_every_spelling_of_infinity(text: str) -> None:
    assert math.isinf(parse_rate(text))
    assert math.isinf(workload_from_texts({"request_rate": text}).request_rate)


@pytest.mark.parametrize("text", ["fast", "0", "-1", "nan"])
def test_a_bad_rate_says_what_a_rate_is(text: str) -> None:
    with pytest.raises(ValueTextError, match="requests per second"):
        parse_rate(text)
    with pytest.raises(WorkloadError, match=r"^rate .*requests per second"):
        workload_from_texts({"request_rate": text})
    with pytest.raises(WorkloadError, match=r"^--request-rate .*requests per second"):
        workload_from_texts({"request_rate": text}, by_flag=True)


def test_workload_texts_read_back_as_the_same_workload() -> None:
    w = Workload(input_len=7, output_len=9, num_prompts=3, concurrency=None, request_rate=2.5,
                 slo={"ttft": 500.0}, warmup_requests=2)  # fmt: skip
    assert workload_from_texts(workload_texts(w), warmup=2) == w


@pytest.mark.parametrize(("text", "value"), [("2%", 0.02), ("0.05", 0.05), (" 50% ", 0.5)])
def test_fraction_parser_takes_percent_and_share(text: str, value: float) -> None:
    assert parse_fraction(text) == pytest.approx(value)


@pytest.mark.parametrize(("text", "says"), [("two", "percentage such as 2%"), ("150%", "between"),
                                            ("0", "between"), ("1", "between")])  # fmt: skip
def test_a_bad_fraction_says_what_a_fraction_is(text: str, says: str) -> None:
    with pytest.raises(ValueTextError, match=says):
        parse_fraction(text)


def test_check_workload_options_override_the_presets_and_nothing_is_none() -> None:
    shape = shape_for_check({"input_len": 2048, "concurrency": 8}, None, 128, 64, None)
    assert shape is not None
    assert (shape.input_len, shape.output_len, shape.concurrency) == (2048, 128, 64)
    assert shape_for_check(None, None, None, None, None) is None


def test_check_target_given_version_and_platform_win_over_the_preset_and_skip_introspection() -> (
    None
):
    class PresetTarget:
        vllm_version, platform, gpu_count = "0.10.0", "cuda", 4

    target, notes = for_check("0.12.0", "rocm", None, 192.0, PresetTarget())
    assert (target.vllm_version, target.platform, target.gpus) == ("0.12.0", "rocm", 4)
    assert target.note == "given" and notes == []
    target, _ = for_check(None, None, 2, None, PresetTarget())
    assert (target.vllm_version, target.platform, target.gpus) == ("0.10.0", "cuda", 2)


def test_bool_parser() -> None:
    assert parse_bool("On") is True and parse_bool("0") is False and parse_bool(True) is True
    with pytest.raises(ValueTextError):
        parse_bool("maybe")


def test_config_from_model_and_items_and_bad_item() -> None:
    config = build_config(None, "org/model", ["max-num-seqs=8", "CUDA_VISIBLE_DEVICES=1"])
    assert config.model == "org/model"
    assert config.engine["max-num-seqs"] == 8 and config.env["CUDA_VISIBLE_DEVICES"] == "1"
    with pytest.raises(ConfigInputError, match="max-num-seqs"):
        build_config(None, "org/model", ["max-num-seqs=abc"])
    assert build_config(None, None).model == ""  # check's no-model case


def test_telemetry_vram_wins_over_introspection_but_not_over_a_given_target() -> None:
    seen = Target("0.32.0", "cuda", gpus=1, vram_gib=40.0)
    assert with_node_gpus(seen, 8, 192.0).vram_gib == 192.0
    assert with_node_gpus(seen, 8, None).vram_gib == 40.0
    given = Target("0.32.0", "cuda", gpus=2, vram_gib=80.0, note="given")
    assert with_node_gpus(given, 8, 192.0) == given


def test_baseline_is_kept_per_study_across_store_reopens(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    first, second = _trial(64, 100.0), _trial(2, 50.0)
    with TrialStore(path) as store:
        for t in (first, second, _trial(8, 70.0, study="other")):
            store.add(t)
        study = Study(store, "s")
        assert study.baseline() == study.baseline() and study.baseline().how is BaselineChoice.FIRST
        study.mark_baseline(second.id)
    with TrialStore(path) as store:  # a new session
        chosen = Study(store, "s").baseline()
        assert chosen is not None and chosen.trial.id == second.id
        assert chosen.how is BaselineChoice.MARKED
        assert Study(store, "other").baseline().how is BaselineChoice.FIRST


def test_compare_never_picks_the_baseline_config_and_uses_the_ab_when_there_is_one(
    tmp_path: Path,
) -> None:
    base = _trial(64, 100.0)
    ab = [
        _trial(64, 101.0, arm="A", repeat=0),
        _trial(2, 50.0, arm="B", repeat=0),
        _trial(2, 52.0, arm="B", repeat=1),
        _trial(64, 99.0, arm="A", repeat=1),
    ]
    with TrialStore(tmp_path / "t.db") as store:
        for t in (base, *ab):
            store.add(t)
        study = Study(store, "s")
        # The ★ row itself selected: the pick is another config, never the baseline.
        other = study.pick_other(base, base.id)
        assert other is not None and other.config_id != base.config_id
        # ... and it says so: Compare never shows another trial than the cursor's unannounced.
        why = study.pick_reason(base, base.id, other)
        assert why is not None and "has the baseline's config" in why and other.short_id in why
        assert study.pick_reason(base, other.id, other) is None
        assert study.pick_reason(base, None, other) is None
        gone = study.pick_reason(base, "ffffffffdeadbeef", other)
        assert gone is not None and "not in this study" in gone
        # Before any A/B is remembered the view pools (and says so): 3 vs 2 samples.
        pooled = study.compare(base, other)
        assert pooled.source is ComparisonSource.POOLED
        assert [len(pooled.a), len(pooled.b)] == [3, 2]
        assert base.short_id in pooled.provenance()
        report = build_report(ab, study="s", objective="output_throughput")
        study.remember_ab(report)
        chosen = study.compare(base, other)
        assert chosen.source is ComparisonSource.AB
        assert chosen.report.to_dict() == report.to_dict()  # the A/B's verdict, not re-pooled
        assert base.short_id not in chosen.provenance()
        trial, statement = study.export_choice()
        assert report.summary() in statement
        # B is slower: the export keeps the baseline config (arm A).
        assert report.verdict is not Verdict.B_BETTER
        assert trial is not None and trial.config_id == base.config_id


def test_node_gpus_name_the_gpu_model_and_partition_from_telemetry() -> None:
    from tuner.rules import Target

    base = Target(vllm_version="0.33.0", platform="rocm")
    cpx = with_node_gpus(base, 64, 24.0, "AMD Instinct MI300X", "CPX")
    assert (cpx.gpu_name, cpx.partition, cpx.gpus, cpx.vram_gib) == ("MI300X", "CPX", 64, 24.0)
    whole = with_node_gpus(base, 8, 192.0, "AMD Instinct MI300X", "SPX")
    assert whole.gpu_name == "MI300X" and whole.partition is None
    unknown = with_node_gpus(base, 2, 40.0, "Some Future GPU", None)
    assert unknown.gpu_name is None and unknown.gpus == 2
    given = replace(base, note="given")
    assert with_node_gpus(given, 8, 192.0, "AMD Instinct MI300X", None) == given


async def test_tui_target_names_the_node_gpu_from_telemetry() -> None:
    from tests.support.tui_harness import services, settle
    from tui.app import TunelabApp

    app = TunelabApp(services=services(gpus=True))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        target = app.session.target
        assert target.gpu_name == "MI355X"  # the recorded (fake) amdsmi node: 8x MI355X
        assert target.gpus == app.session.gpu_count == 8
