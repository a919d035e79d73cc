"""Study building blocks without an engine: space parsing, A/B schedule and report, winner."""

from __future__ import annotations

import json

import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.studies.ab import ABError, build_report, schedule
from tuner.studies.space import SpaceError, load_space, parse_constraint, parse_param
from tuner.studies.stats import Verdict
from tuner.studies.winner import WinnerError, pick_winner
from tuner.trials.model import Trial, TrialStatus

WL = Workload(input_len=16, output_len=16, num_prompts=8)


def _trial(mns: int, tput: float, ttft: float = 100.0, **kw: object) -> Trial:
    t = Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": mns}),
        workload=WL,
        study="s",
        status=kw.pop("status", TrialStatus.DONE),  # type: ignore[arg-type]
        results={"output_throughput": tput, "p99_ttft_ms": ttft},
    )
    for key, value in kw.items():
        setattr(t, key, value)
    return t


# -- space ----------------------------------------------------------------------------
def test_param_forms() -> None:
    p = parse_param("max-num-seqs=1,64")
    assert (p.kind, p.choices) == ("categorical", (1, 64))
    p = parse_param("max-num-batched-tokens=int:1024..16384:log")
    assert (p.kind, p.low, p.high, p.log) == ("int", 1024, 16384, True)
    p = parse_param("gpu-memory-utilization=float:0.2..0.4")
    assert (p.kind, p.low, p.high) == ("float", 0.2, 0.4)
    assert parse_param("VLLM_ROCM_USE_AITER=0,1").choices == (False, True)
    assert parse_param("concurrency=1,8,32").is_workload
    assert parse_param("max-num-seqs=int:2..4").values() == [2, 3, 4]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("max-num-seqs", "no '='"),
        ("max-num-seqs=", "both a key and values"),
        ("max-num-seqs=int:9..x", "int range"),
        ("max-num-seqs=int:8..2", "empty"),
        ("max-num-seqs=abc", "whole number"),
        ("max-num-seqs=8,8", "twice"),
        ("max-num-batched-tokens=int:0..10:log", "LO > 0"),
    ],
)
def test_bad_params_say_what_to_write(text: str, needle: str) -> None:
    with pytest.raises(SpaceError, match=needle):
        parse_param(text)


def test_constraints() -> None:
    c = parse_constraint("p99_ttft_ms<=500")
    assert c.met(499.0) and c.met(500.0) and not c.met(501.0)
    assert not c.met(None)
    assert parse_constraint("output_throughput >= 10").violation(4) == 6
    with pytest.raises(SpaceError, match="METRIC<=VALUE"):
        parse_constraint("p99_ttft_ms=500")


def test_space_file_toml_and_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    toml = tmp_path / "space.toml"
    toml.write_text(
        'slo = ["p99_ttft_ms<=500"]\n[params]\nmax-num-seqs = [8, 64]\n'
        '"max-num-batched-tokens" = { type = "int", low = 512, high = 8192, log = true }\n'
        'gpu-memory-utilization = "float:0.2..0.3"\n[fixed]\nconcurrency = 8\n'
    )
    space = load_space(toml)
    assert [p.key for p in space.params] == [
        "max-num-seqs",
        "max-num-batched-tokens",
        "gpu-memory-utilization",
    ]
    assert str(space.constraints[0]) == "p99_ttft_ms<=500"
    assert space.fixed == {"concurrency": 8}
    js = tmp_path / "space.json"
    js.write_text(json.dumps({"params": {"max-num-seqs": [1, 2]}}))
    assert load_space(js).params[0].choices == (1, 2)
    bad = tmp_path / "bad.toml"
    bad.write_text("[knobs]\nx = [1]\n")
    with pytest.raises(SpaceError, match="unknown section"):
        load_space(bad)
    with pytest.raises(SpaceError, match="does not exist"):
        load_space(tmp_path / "missing.toml")


# -- A/B ------------------------------------------------------------------------------
def test_schedule_is_interleaved_and_counterbalanced() -> None:
    assert schedule(2, "abab") == [("A", 0), ("B", 0), ("A", 1), ("B", 1)]
    assert schedule(3) == [("A", 0), ("B", 0), ("B", 1), ("A", 1), ("A", 2), ("B", 2)]
    with pytest.raises(ABError, match="repeats"):
        schedule(0)


def test_ab_report_verdicts_and_failures() -> None:
    trials = [
        _trial(1, 100.0, 900.0, arm="A", repeat=0),
        _trial(64, 1000.0, 100.0, arm="B", repeat=0),
        _trial(64, 1010.0, 110.0, arm="B", repeat=1),
        _trial(1, 104.0, 950.0, arm="A", repeat=1),
        _trial(1, 0.0, arm="A", repeat=2, status=TrialStatus.FAILED, failure_reason="engine died"),
    ]
    report = build_report(trials, study="s", objective="output_throughput", metrics=["p99_ttft_ms"])
    assert report.verdict is Verdict.B_BETTER
    ttft = next(r for r in report.rows if r.metric == "p99_ttft_ms")
    assert ttft.verdict is Verdict.B_BETTER  # lower latency for B
    assert report.failures == ["A3: failed (engine died)"]
    assert report.objective_row is not None and report.objective_row.a.n == 2
    assert report.notes == []  # no trial says its responses came in one piece
    data = report.to_dict()
    assert data["verdict"] == "B better" and "B better on output_throughput" in data["summary"]
    json.dumps(data)  # JSON-ready (no inf)


def _abba_trials() -> list:
    """A/B in ABBA order, max-num-seqs 1 vs 64: B about ten times faster."""
    return [
        _trial(1, 100.0, arm="A", repeat=0),
        _trial(64, 1000.0, arm="B", repeat=0),
        _trial(64, 1010.0, arm="B", repeat=1),
        _trial(1, 104.0, arm="A", repeat=1),
    ]


def test_ab_report_notes_the_trials_whose_responses_came_in_one_piece() -> None:
    trials = _abba_trials()
    trials[0].results["tunelab"] = {"one_chunk_fraction": 1.0}
    trials[1].results["tunelab"] = {"one_chunk_fraction": 0.0}
    report = build_report(trials, study="s", objective="output_throughput")
    assert report.notes == [
        "A1: 100% of responses arrived in one piece: TTFT/ITL show a starved server"
    ]
    assert report.to_dict()["notes"] == report.notes
    assert report.verdict is Verdict.B_BETTER  # the objective's samples are all kept


def test_ab_report_withholds_the_tpot_itl_verdicts_of_an_arm_that_came_in_one_piece() -> None:
    """One owner: the report says which rows draw no verdict; the CLI and the TUI print it."""
    trials = _abba_trials()
    for t, itl in zip(trials, (0.0, 10.0, 10.2, 0.0), strict=True):
        t.results["median_itl_ms"] = itl
    trials[0].results["tunelab"] = {"one_chunk_fraction": 1.0}
    report = build_report(
        trials, study="s", objective="output_throughput", metrics=["median_itl_ms", "p99_ttft_ms"]
    )
    rows = {r.metric: r for r in report.rows}
    assert rows["median_itl_ms"].one_piece == ("A",)
    assert rows["median_itl_ms"].withheld == "A in one piece"
    assert rows["median_itl_ms"].shown_verdict == "no verdict"
    assert rows["median_itl_ms"].to_dict()["withheld"] == "A in one piece"
    # TTFT and throughput still hold: their verdicts stand.
    assert rows["p99_ttft_ms"].withheld is None and rows["output_throughput"].one_piece == ()
    assert report.verdict is Verdict.B_BETTER
    # An ITL objective gets no verdict at all, and the sentence says why.
    on_itl = build_report(trials, study="s", objective="median_itl_ms")
    assert on_itl.verdict is Verdict.NO_DIFFERENCE
    assert on_itl.summary().startswith("no verdict on median_itl_ms: A in one piece")
    # With streaming in both arms, nothing is withheld.
    trials[0].results["tunelab"] = {"one_chunk_fraction": 0.0}
    plain = build_report(trials, study="s", objective="median_itl_ms")
    assert plain.objective_row is not None and plain.objective_row.withheld is None


def test_ab_report_says_how_many_gpu_samples_of_each_arm_were_clean() -> None:
    trials = _abba_trials()
    for t, (n, ok, dirt) in zip(
        trials,
        ((16, 16, {}), (16, 13, {"foreign process": 3}), (16, 16, {}), (16, 15, {"throttled": 1})),
        strict=True,
    ):
        t.telemetry = {"samples": n, "samples_clean": ok, "dirt": dirt}
    report = build_report(trials, study="s", objective="output_throughput")
    assert (
        "GPU samples clean: A 31/32, B 29/32; A: 1 throttled; B: 3 foreign process" in report.notes
    )
    for t in trials:
        t.telemetry = None  # the CPU engine: no GPU window, no line
    assert not [
        n
        for n in build_report(trials, study="s", objective="output_throughput").notes
        if "GPU samples" in n
    ]


def test_ab_report_notes_the_repeats_measured_while_others_took_the_cpu() -> None:
    from tuner.bench.host_noise import HostNoise

    trials = _abba_trials()
    busy = HostNoise(10.0, 2, foreign_share=0.5, steal_share=0.0, top=(("yes", 10.0),))
    quiet = HostNoise(10.0, 2, foreign_share=0.01, steal_share=0.0)
    trials[2].results["tunelab"] = {"host_noise": busy.to_dict()}
    trials[3].results["tunelab"] = {"host_noise": quiet.to_dict()}
    report = build_report(trials, study="s", objective="output_throughput")
    assert report.notes == [f"B2: host: {busy.describe()}"]
    assert "other processes used 50% of the machine's CPU (yes 10.0 s)" in report.notes[0]


def test_ab_report_names_what_differed_in_the_environment_between_and_within_arms() -> None:
    trials = _abba_trials()
    same = {"vllm_version": "0.32.0", "power_cap_w": 750.0}
    for t in trials:
        t.environment = dict(same)
    assert build_report(trials, study="s", objective="output_throughput").notes == []
    trials[1].environment = {"vllm_version": "0.33.0", "power_cap_w": 750.0}
    trials[2].environment = {"vllm_version": "0.33.0", "power_cap_w": 600.0}
    notes = build_report(trials, study="s", objective="output_throughput").notes
    assert notes == [
        "environment: A and B ran on different setups (vllm_version: 0.32.0 -> 0.33.0): "
        "the A/B measures that difference too",
        "environment: B's repeats ran on different setups (power_cap_w: 750.0 -> 600.0)",
    ]
    trials[3].environment = None  # a trial from before schema 6: no evidence either way
    trials[1].environment = trials[2].environment = dict(same)
    assert build_report(trials, study="s", objective="output_throughput").notes == []


def test_ab_report_inside_the_noise() -> None:
    trials = [
        _trial(8, v, arm=arm, repeat=i)
        for i, (arm, v) in enumerate([("A", 100), ("B", 120), ("B", 90), ("A", 115)])
    ]
    report = build_report(trials, study="s", objective="output_throughput")
    assert report.verdict is Verdict.NO_DIFFERENCE


# -- winner ---------------------------------------------------------------------------
def test_winner_pools_repeats_and_states_its_margin() -> None:
    trials = [
        _trial(64, 1000.0),
        _trial(64, 1020.0),
        _trial(64, 990.0),
        _trial(8, 600.0),
        _trial(8, 610.0),
        _trial(8, 590.0),
        _trial(128, 5000.0, ttft=900.0),  # fastest but misses the SLO
        _trial(1, 0.0, status=TrialStatus.SKIPPED),
    ]
    report = pick_winner(trials, study="s", constraints=[parse_constraint("p99_ttft_ms<=500")])
    assert report.winner.representative().config.engine["max-num-seqs"] == 64
    assert report.runner_up is not None and report.runner_up.mean == pytest.approx(600.0)
    assert report.margin is not None and report.margin.verdict is Verdict.B_BETTER
    assert "real margin" in report.statement
    assert report.excluded == {"skipped by the rules": 1, "misses SLO": 1}


def test_winner_with_single_runs_does_not_claim_a_win() -> None:
    report = pick_winner([_trial(64, 1000.0), _trial(8, 900.0)], study="s")
    assert "not yet a win" in report.statement
    close = pick_winner(
        [_trial(64, v) for v in (1000.0, 900.0, 1100.0)] + [_trial(8, v) for v in (980, 880, 1070)],
        study="s",
    )
    assert "no significant difference" in close.statement


def test_winner_for_latency_picks_the_lowest() -> None:
    trials = [_trial(64, 1000.0, ttft=300.0), _trial(8, 900.0, ttft=120.0)]
    report = pick_winner(trials, study="s", objective="p99_ttft_ms")
    assert report.winner.representative().config.engine["max-num-seqs"] == 8


def test_no_winner_says_why() -> None:
    with pytest.raises(WinnerError, match="no trials"):
        pick_winner([], study="s")
    with pytest.raises(WinnerError, match="misses SLO"):
        pick_winner(
            [_trial(64, 1000.0, ttft=900.0)],
            study="s",
            constraints=[parse_constraint("p99_ttft_ms<=500")],
        )


def test_a_space_file_nested_beyond_the_stack_is_refused_clearly(tmp_path) -> None:
    path = tmp_path / "space.toml"
    path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(SpaceError, match="nests tables or arrays too deeply"):
        load_space(path)
