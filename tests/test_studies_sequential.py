"""Sequential A/B stopping: the boundaries, the error rate on a fixed seed, and the decisions."""

from __future__ import annotations

import math
import random

import pytest

from tuner.studies.sequential import (
    Decision,
    SequentialDesign,
    SequentialError,
    SequentialMonitor,
    Spending,
    boundaries,
    comparison_at,
)
from tuner.studies.stats import Verdict

METRIC = "output_throughput"


def test_boundaries_match_the_published_lan_demets_values() -> None:
    # Pocock-type spending, 5 equally spaced looks, alpha 0.05 two-sided:
    # 2.438, 2.427, 2.410, 2.397, 2.386 (Jennison & Turnbull 2000, table 7.6).
    got = boundaries((0.2, 0.4, 0.6, 0.8, 1.0), 0.05, Spending.POCOCK)
    assert [round(c, 2) for c in got] == pytest.approx([2.44, 2.43, 2.41, 2.40, 2.39], abs=0.011)
    # O'Brien-Fleming type: the first look spends 2 - 2 Phi(1.96 / sqrt(0.2)).
    obf = boundaries((0.2, 0.4, 0.6, 0.8, 1.0), 0.05, Spending.OBRIEN_FLEMING)
    assert obf[0] == pytest.approx(1.959964 / math.sqrt(0.2), abs=1e-3)
    assert obf[0] > obf[1] > obf[2] > obf[3] > obf[4] > 1.96
    # A single look at t = 1 is the fixed-sample test.
    assert boundaries((1.0,), 0.05, Spending.POCOCK)[0] == pytest.approx(1.96, abs=1e-3)


def _null_ab(design: SequentialDesign, rng: random.Random, sigma: float) -> tuple[bool, bool]:
    """(sequential false win, naive 95 %-at-every-look false win) of one A/B with no effect."""
    monitor = SequentialMonitor(design)
    a: list[float] = []
    b: list[float] = []
    naive = False
    for _ in range(design.max_repeats):
        a.append(1000.0 * math.exp(rng.gauss(0.0, sigma)))
        b.append(1000.0 * math.exp(rng.gauss(0.0, sigma)))
        if len(a) >= 2 and not naive:
            naive = comparison_at(METRIC, a, b, 0.05).verdict is not Verdict.NO_DIFFERENCE
        look = monitor.look(METRIC, a, b)
        if look.decision is not Decision.CONTINUE:
            return look.decision is Decision.DIFFERENT, naive
    return False, naive


def test_stopping_keeps_the_false_win_rate_where_naive_looking_does_not() -> None:
    rng = random.Random(7)
    design = SequentialDesign(max_repeats=5)
    runs = [_null_ab(design, rng, 0.15) for _ in range(400)]
    sequential = sum(s for s, _ in runs) / len(runs)
    naive = sum(n for _, n in runs) / len(runs)
    # 5 % nominal; 400 runs put the binomial 95 % upper range near 7.5 %.
    assert sequential <= 0.075, sequential
    # The same samples looked at naively after every round win falsely far more often.
    assert naive >= 1.6 * max(sequential, 0.03), (naive, sequential)


def test_a_twofold_gain_stops_early_and_a_tiny_one_runs_to_the_end() -> None:
    monitor = SequentialMonitor(SequentialDesign(max_repeats=6))
    a, b = [1000.0, 1020.0, 990.0], [2010.0, 1980.0, 2040.0]
    assert monitor.look(METRIC, a[:2], b[:2]).decision in (Decision.DIFFERENT, Decision.CONTINUE)
    look = monitor.look(METRIC, a, b)
    assert look.decision is Decision.DIFFERENT
    assert look.comparison is not None and look.comparison.verdict is Verdict.B_BETTER
    assert look.comparison.confidence > 0.95  # a repeated interval is wider than a one-off 95 %
    flat = SequentialMonitor(SequentialDesign(max_repeats=3))
    rng = random.Random(3)
    xs = [1000 * math.exp(rng.gauss(0, 0.2)) for _ in range(3)]
    ys = [1000 * math.exp(rng.gauss(0, 0.2)) for _ in range(3)]
    assert flat.look(METRIC, xs[:2], ys[:2]).decision is Decision.CONTINUE
    assert flat.look(METRIC, xs, ys).decision is Decision.EXHAUSTED


def test_equivalence_stops_when_the_interval_is_inside_the_margin() -> None:
    design = SequentialDesign(max_repeats=6, equivalence=0.05)
    monitor = SequentialMonitor(design)
    a = [1000.0, 1001.0, 999.0, 1000.5]
    b = [1000.2, 999.4, 1000.9, 1000.1]
    decisions = [monitor.look(METRIC, a[:n], b[:n]).decision for n in (2, 3, 4)]
    assert Decision.EQUIVALENT in decisions
    # Without a margin the same samples never stop early.
    plain = SequentialMonitor(SequentialDesign(max_repeats=6))
    assert all(plain.look(METRIC, a[:n], b[:n]).decision is Decision.CONTINUE for n in (2, 3, 4))


def test_bad_designs_say_what_to_change() -> None:
    with pytest.raises(SequentialError, match="max-repeats must be >= 2"):
        SequentialDesign(max_repeats=1)
    with pytest.raises(SequentialError, match="equivalence margin"):
        SequentialDesign(max_repeats=4, equivalence=2.0)
