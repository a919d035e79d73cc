"""The front-loaded spending and the pooled interval of the sequential A/B.

Checks the pieces against hand-computed values and the false-win rate of the
combined design on a fixed seed (the full simulation is
benchmarks/ab_sequential.py).
"""

from __future__ import annotations

import math
import random

import pytest

from tuner.studies.ab import _tags, design_of
from tuner.studies.ab_judgement import Judgement
from tuner.studies.sequential import (
    FRONT_RHO,
    Decision,
    SequentialDesign,
    SequentialMonitor,
    Spending,
    spent,
)
from tuner.studies.stats import ArmStats, pooled_interval, welch_interval
from tuner.trials.model import Trial


def test_front_spending_spends_most_of_alpha_at_the_first_look() -> None:
    assert spent(1 / 3, 0.05, Spending.FRONT) == pytest.approx(0.05 * (1 / 3) ** FRONT_RHO)
    assert spent(1.0, 0.05, Spending.FRONT) == pytest.approx(0.05)
    assert spent(1 / 3, 0.05, Spending.FRONT) > spent(1 / 3, 0.05, Spending.POCOCK)
    # O'Brien-Fleming spends almost nothing there: the wrong way for an early stop.
    assert spent(1 / 3, 0.05, Spending.OBRIEN_FLEMING) < 0.001


def test_pooled_interval_is_students_t_with_n_a_plus_n_b_minus_2_df() -> None:
    a, b = ArmStats.of([1.0, 1.2]), ArmStats.of([2.0, 2.4])
    low, high, df = pooled_interval(a, b, 0.95)
    assert df == 2.0
    # sd 0.1414 and 0.2828: pooled var 0.05, se = sqrt(0.05 * 1) = 0.2236; t(2) = 4.303.
    half = 4.302653 * math.sqrt(0.05)
    assert (low, high) == pytest.approx((1.1 - half, 1.1 + half), rel=1e-4)
    w_low, w_high, w_df = welch_interval(a, b, 0.95)
    assert w_df is not None and w_df < 2.0 and w_high - w_low > high - low


def test_the_design_is_stored_and_replayed_with_its_interval() -> None:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig

    design = SequentialDesign(6, 0.05, Spending.FRONT, pooled=True)
    trial = Trial(EngineConfig(model="m"), Workload(), tags=_tags(design, "abba", 6, Judgement()))
    assert design_of([trial]) == design
    old = dict(trial.tags["sequential"])
    del old["pooled"]  # an A/B stored before the option: Welch, as it ran
    trial.tags["sequential"] = old
    replayed = design_of([trial])
    assert replayed is not None and replayed.pooled is False


def _ab(design: SequentialDesign, sigma: float, effect: float, rng: random.Random) -> Decision:
    monitor = SequentialMonitor(design)
    a: list[float] = []
    b: list[float] = []
    for _ in range(design.max_repeats):
        a.append(1000.0 * math.exp(rng.gauss(0.0, sigma)))
        b.append(1000.0 * (1.0 + effect) * math.exp(rng.gauss(0.0, sigma)))
        look = monitor.look("output_throughput", a, b)
        if look.decision is not Decision.CONTINUE:
            return look.decision
    return Decision.EXHAUSTED


def test_front_pooled_keeps_the_error_rate_and_stops_a_twofold_gain_at_two() -> None:
    design = SequentialDesign(6, 0.05, Spending.FRONT, pooled=True)
    rng = random.Random(20261123)
    false_wins = sum(_ab(design, 0.15, 0.0, rng) is Decision.DIFFERENT for _ in range(600))
    assert false_wins / 600 <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 600), false_wins
    stopped_at_two = 0
    for _ in range(300):
        monitor = SequentialMonitor(design)
        a = [1000.0 * math.exp(rng.gauss(0.0, 0.15)) for _ in range(2)]
        b = [2000.0 * math.exp(rng.gauss(0.0, 0.15)) for _ in range(2)]
        stopped_at_two += monitor.look("output_throughput", a, b).decision is Decision.DIFFERENT
    assert stopped_at_two / 300 > 0.5, stopped_at_two
