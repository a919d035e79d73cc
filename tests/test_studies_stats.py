"""The noise-aware comparison on synthetic samples with known answers."""

from __future__ import annotations

import json
import math
import random
import re

import pytest

from tuner.studies.stats import (
    ArmStats,
    Direction,
    Scale,
    StatsError,
    Verdict,
    compare,
    format_relative,
    metric_direction,
    welch_interval,
)
from tuner.trials.tdist import t_cdf, t_quantile

# Two-sided 95% / 99% critical values from any t table.
T_TABLE = {
    1: (12.706, 63.657),
    2: (4.303, 9.925),
    3: (3.182, 5.841),
    4: (2.776, 4.604),
    5: (2.571, 4.032),
    8: (2.306, 3.355),
    10: (2.228, 3.169),
    30: (2.042, 2.750),
}


@pytest.mark.parametrize("df", sorted(T_TABLE))
def test_t_quantile_matches_the_table(df: int) -> None:
    q95, q99 = T_TABLE[df]
    assert t_quantile(0.975, df) == pytest.approx(q95, abs=1e-3)
    assert t_quantile(0.995, df) == pytest.approx(q99, abs=1e-3)


def test_t_quantile_tends_to_the_normal_and_is_symmetric() -> None:
    assert t_quantile(0.975, 1e7) == pytest.approx(1.95996, abs=1e-4)
    assert t_quantile(0.025, 4) == pytest.approx(-t_quantile(0.975, 4))
    assert t_cdf(0.0, 3) == 0.5
    # Non-integer df (Welch) lies between its integer neighbours.
    assert t_quantile(0.975, 3) > t_quantile(0.975, 3.5) > t_quantile(0.975, 4)


def test_welch_interval_known_answer() -> None:
    # A = [10, 12, 14] (mean 12, var 4), B = [20, 22, 24] (mean 22, var 4):
    # se = sqrt(4/3 + 4/3) = 1.63299, df = 4, t = 2.776445 -> half = 4.5339.
    low, high, df = welch_interval(ArmStats.of([10, 12, 14]), ArmStats.of([20, 22, 24]))
    assert df == pytest.approx(4.0)
    assert low == pytest.approx(10 - 4.53393, abs=1e-4)
    assert high == pytest.approx(10 + 4.53393, abs=1e-4)


def test_clear_throughput_gain_is_b_better() -> None:
    c = compare("output_throughput", [100, 103, 98], [150, 148, 155])
    assert c.direction is Direction.HIGHER
    assert c.verdict is Verdict.B_BETTER
    assert c.scale is Scale.RATIO
    geo_a, geo_b = (100 * 103 * 98) ** (1 / 3), (150 * 148 * 155) ** (1 / 3)
    assert c.rel_diff == pytest.approx(geo_b / geo_a - 1, rel=1e-9)
    assert c.rel_ci_low is not None and c.rel_ci_low > 0
    assert c.ci_low == pytest.approx(geo_a * c.rel_ci_low)


def test_ratio_interval_is_welch_on_the_logs() -> None:
    a, b = [10.0, 12.0, 14.0], [20.0, 22.0, 24.0]
    low, high, df = welch_interval(
        ArmStats.of([math.log(v) for v in a]), ArmStats.of([math.log(v) for v in b])
    )
    c = compare("output_throughput", a, b)
    assert c.df == pytest.approx(df)
    assert c.rel_ci_low == pytest.approx(math.exp(low) - 1)
    assert c.rel_ci_high == pytest.approx(math.exp(high) - 1)
    # The interval of a ratio is not symmetric around the point estimate.
    assert c.rel_ci_high - c.rel_diff > c.rel_diff - c.rel_ci_low


def test_several_fold_gain_with_two_repeats_is_found_on_the_ratio_scale() -> None:
    """Real CPU-engine samples (max-num-seqs 1 vs 64): the fast arm's larger
    absolute spread makes the raw-scale interval useless at n=2."""
    a, b = [712.57, 672.50], [4595.18, 5356.53]
    assert compare("output_throughput", a, b).verdict is Verdict.B_BETTER
    raw = compare("output_throughput", a, b, scale=Scale.DIFFERENCE)
    assert raw.verdict is Verdict.NO_DIFFERENCE
    assert raw.scale is Scale.DIFFERENCE and raw.ci_low < 0 < raw.ci_high


def test_zero_samples_fall_back_to_the_difference_and_ratio_is_refused() -> None:
    c = compare("median_tpot_ms", [0.0, 0.0], [5.0, 4.0])
    assert c.scale is Scale.DIFFERENCE
    with pytest.raises(StatsError, match="zero or negative"):
        compare("median_tpot_ms", [0.0, 0.0], [5.0, 4.0], scale=Scale.RATIO)


def test_to_dict_is_json_safe_without_an_interval() -> None:
    data = compare("output_throughput", [100.0], [200.0]).to_dict()
    assert data["ci_low"] is None and data["rel_ci_high"] is None
    assert data["scale"] == "ratio"
    json.dumps(data, allow_nan=False)


def test_direction_flips_the_verdict_for_latency() -> None:
    # B's numbers are higher: for a latency that is worse, so A wins.
    c = compare("p99_ttft_ms", [100, 103, 98], [150, 148, 155])
    assert c.direction is Direction.LOWER
    assert c.verdict is Verdict.A_BETTER
    c = compare("p99_ttft_ms", [150, 148, 155], [100, 103, 98])
    assert c.verdict is Verdict.B_BETTER


def test_identical_distributions_are_no_difference_nearly_always() -> None:
    """Same distribution both arms: at 95% about 5% false wins, never a systematic one."""
    rng = random.Random(7)
    wins = 0
    trials = 400
    for _ in range(trials):
        a = [rng.gauss(100, 5) for _ in range(3)]
        b = [rng.gauss(100, 5) for _ in range(3)]
        if compare("output_throughput", a, b).verdict is not Verdict.NO_DIFFERENCE:
            wins += 1
    # Welch at small n is conservative: the false-win rate is at most ~5%.
    assert wins / trials <= 0.07


def test_noise_larger_than_the_gap_is_no_difference() -> None:
    c = compare("output_throughput", [100, 130, 80], [110, 140, 90])
    assert c.verdict is Verdict.NO_DIFFERENCE
    assert c.ci_low < 0 < c.ci_high
    assert "contains 0%" in c.reason


def test_one_repeat_never_declares_a_winner() -> None:
    c = compare("output_throughput", [100], [1000])
    assert c.verdict is Verdict.NO_DIFFERENCE
    assert math.isinf(c.ci_low) and math.isinf(c.ci_high)
    assert "2 repeats" in c.reason
    assert "interval unknown" in format_relative(c)


def test_changes_past_1000_percent_drop_the_decimal() -> None:
    c = compare("p99_ttft_ms", [10.0, 11.0, 12.0], [800.0, 840.0, 880.0])
    text = format_relative(c)
    assert re.fullmatch(r"\+\d{4}% \[\+\d{4}%, \+\d{4}%\]", text), text
    small = format_relative(compare("output_throughput", [100, 101, 99], [110, 111, 109]))
    assert small.startswith("+10.0%"), small


def test_min_effect_keeps_a_negligible_win_from_counting() -> None:
    a = [100.0, 100.1, 99.9, 100.0, 100.05]
    b = [100.5, 100.6, 100.4, 100.5, 100.55]
    assert compare("output_throughput", a, b).verdict is Verdict.B_BETTER
    assert compare("output_throughput", a, b, min_rel_effect=0.02).verdict is Verdict.NO_DIFFERENCE


def test_metric_directions() -> None:
    assert metric_direction("output_throughput") is Direction.HIGHER
    assert metric_direction("request_goodput") is Direction.HIGHER
    assert metric_direction("tokens_per_joule") is Direction.HIGHER
    assert metric_direction("median_itl_ms") is Direction.LOWER
    assert metric_direction("p99_e2el_ms") is Direction.LOWER
    assert metric_direction("failed") is Direction.LOWER
    with pytest.raises(StatsError, match="direction"):
        metric_direction("mystery")
    c = compare("mystery", [1, 2, 3], [7, 8, 9], direction=Direction.LOWER)
    assert c.verdict is Verdict.A_BETTER


def test_bad_input_says_what_is_wrong() -> None:
    with pytest.raises(StatsError, match="no samples"):
        compare("output_throughput", [], [1.0])
    with pytest.raises(StatsError, match="NaN"):
        compare("output_throughput", [1.0, math.nan], [1.0, 2.0])
    with pytest.raises(StatsError, match="confidence"):
        compare("output_throughput", [1.0, 2.0], [1.0, 2.0], confidence=95)


def test_zero_variance_with_a_real_difference_is_decided() -> None:
    c = compare("failed", [0, 0, 0], [2, 2, 2])
    assert c.verdict is Verdict.A_BETTER
    c = compare("failed", [0, 0, 0], [0, 0, 0])
    assert c.verdict is Verdict.NO_DIFFERENCE
