"""Preset re-verification without an engine: the stored reference and the regression verdict."""

from __future__ import annotations

import pytest

from tuner.studies.stats import Direction
from tuner.studies.verify import (
    IMPROVED,
    NOT_MEASURED,
    PASSED,
    REGRESSION,
    Reference,
    VerifyError,
    VerifyReport,
    judge,
    reference_of,
)


def test_reference_from_results_noise_current_and_aiperf_names() -> None:
    results = {
        "objective": "output_throughput",
        "objective_value": 101.0,
        "noise": {"objective": "output_throughput", "repeats": 3, "mean": 100.0, "stdev": 4.0},
    }
    assert reference_of(results) == Reference("output_throughput", 3, 100.0, 4.0)
    aiperf = {"objective": "output_throughput", "noise": {"n": 4, "mean": 100.0, "se": 2.0}}
    assert reference_of(aiperf) == Reference("output_throughput", 4, 100.0, 4.0)


def test_reference_without_noise_is_the_single_value() -> None:
    ref = reference_of({"objective": "p99_ttft_ms", "objective_value": 80.0})
    assert ref == Reference("p99_ttft_ms", 1, 80.0, None) and not ref.has_noise
    # Noise of another metric says nothing about the objective's.
    other = {
        "objective": "p99_ttft_ms",
        "p99_ttft_ms": 80.0,
        "noise": {"objective": "output_throughput", "repeats": 3, "mean": 5, "stdev": 1},
    }
    assert reference_of(other).n == 1


@pytest.mark.parametrize(
    "results", [None, {}, {"objective_value": 3.0}, {"objective": "output_throughput"}]
)
def test_nothing_to_verify_against_is_a_user_error(results: dict | None) -> None:
    with pytest.raises(VerifyError) as info:
        reference_of(results)
    assert info.value.exit_code == 2 and "tunelab export" in (info.value.fix or "")


REF = Reference("output_throughput", 3, 100.0, 3.0)


def test_unchanged_passes_and_a_slower_node_is_a_regression() -> None:
    assert judge(REF, [99.0, 101.5, 100.2]).verdict == PASSED
    slow = judge(REF, [70.0, 72.0, 69.0])
    assert slow.verdict == REGRESSION
    assert slow.rel == pytest.approx(-0.297, abs=0.001)
    assert slow.rel_low is not None and slow.rel_high is not None and slow.rel_high < 0
    assert judge(REF, [130.0, 131.0, 129.0]).verdict == IMPROVED


def test_latency_objectives_regress_upwards() -> None:
    ref = Reference("p99_ttft_ms", 3, 100.0, 3.0)
    assert judge(ref, [140.0, 138.0, 141.0]).verdict == REGRESSION
    assert judge(ref, [60.0, 61.0, 59.0]).verdict == IMPROVED


def test_tolerance_lets_a_small_real_regression_pass() -> None:
    steady = Reference("output_throughput", 3, 100.0, 1.0)
    small = [95.0, 95.5, 94.8]
    assert judge(steady, small).verdict == REGRESSION
    tolerated = judge(steady, small, tolerance=0.10)
    assert tolerated.verdict == PASSED and "tolerance" in tolerated.reason


def test_without_stored_noise_the_figure_is_taken_as_exact() -> None:
    exact = Reference("output_throughput", 1, 100.0, None)
    j = judge(exact, [97.0, 96.5, 97.2])
    assert j.verdict == REGRESSION and "taken as exact" in j.reason


def test_noisy_fresh_runs_make_no_claim() -> None:
    assert judge(REF, [60.0, 140.0, 95.0]).verdict == PASSED
    assert judge(REF, []).verdict == NOT_MEASURED


def test_report_fails_on_regression_and_on_nothing_measured() -> None:
    def report(verdict_values: list[float]) -> VerifyReport:
        return VerifyReport("p", "s", REF, verdict_values, judge(REF, verdict_values))

    assert report([70.0, 71.0, 69.0]).failed
    assert report([]).failed
    ok = report([100.0, 101.0, 99.0])
    assert not ok.failed
    assert ok.summary().startswith("pass: output_throughput stored 100 (n=3), now 100 (n=3)")
    assert ok.to_dict()["verdict"] == "pass"


def test_the_real_cpu_runs_on_the_ratio_scale() -> None:
    """docs/production.md: the stored preset (n=4) against the unchanged and the slowed runs."""
    stored = Reference("output_throughput", 4, 695.7602795548835, 222.7883487672448)
    unchanged = judge(stored, [890.4, 1006.5, 832.3])
    assert unchanged.verdict == PASSED
    slowed = judge(stored, [218.4, 157.1, 331.9])
    assert slowed.verdict == REGRESSION
    # A ratio never falls below -100 %, as the difference of means can with this much noise.
    assert slowed.rel_low is not None and -1.0 < slowed.rel_low < slowed.rel_high < 0  # type: ignore[operator]


def test_a_zero_or_negative_value_falls_back_to_the_difference() -> None:
    ref = Reference("failed", 3, 2.0, 1.0)
    j = judge(ref, [0.0, 1.0, 0.0], direction=Direction.LOWER)
    assert j.verdict in (PASSED, IMPROVED) and "now/stored" not in j.reason
