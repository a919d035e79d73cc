"""The pruning rule: dominated beyond the noise, never on one sample; Optuna's pruner API.

Pure tests of :func:`tuner.studies.pruning.dominated` and of the Optuna
pruner built on it (an in-memory Optuna study, no engine).
"""

from __future__ import annotations

import random

import optuna
import pytest
from optuna.trial import TrialState

from tuner.bench.progress import BenchProgress
from tuner.studies.pruning import (
    PruneError,
    PruneMonitor,
    PruneRule,
    ReadingLog,
    dominated,
    make_optuna_pruner,
)
from tuner.trials.model import Trial


def _series(rate: float, n: int, noise: float = 0.05, seed: int = 0) -> list[tuple[int, float]]:
    """n readings 0.5 s apart around ``rate`` (relative noise ``noise``)."""
    rng = random.Random(seed)
    return [(5 * (i + 1), rate * (1 + rng.gauss(0, noise))) for i in range(n)]


def test_a_clearly_dominated_point_is_pruned_with_its_reason() -> None:
    best = _series(1000.0, 8, seed=1)
    slow = _series(250.0, 6, seed=2)
    decision = dominated(slow, {"fast": best})
    assert decision is not None
    assert decision.reference == "fast"
    assert decision.gap == pytest.approx(0.75, abs=0.05)
    assert decision.readings == 6 and decision.window_s == pytest.approx(3.0)
    assert decision.reason().startswith("pruned: interim")


def test_never_pruned_on_a_single_sample_however_low() -> None:
    best = _series(1000.0, 8, seed=1)
    for lone in (0.0, 1.0, 100.0):
        assert dominated([(20, lone)], {"fast": best}) is None
    # Two or three low readings are not enough either (default rule: 4).
    assert dominated([(5, 1.0), (10, 1.0), (15, 1.0)], {"fast": best}) is None
    # And a rule that would allow it is refused.
    with pytest.raises(PruneError, match="one noisy reading"):
        PruneRule(min_readings=1)


def test_one_wild_reading_among_normal_ones_does_not_prune() -> None:
    best = _series(1000.0, 8, seed=1)
    stall = [(5, 5.0), *[(5 * (i + 2), 980.0) for i in range(6)]]
    assert dominated(stall, {"fast": best}) is None


def test_a_gap_within_the_noise_is_kept() -> None:
    best = _series(1000.0, 8, noise=0.15, seed=3)
    close = _series(700.0, 8, noise=0.15, seed=4)  # 30 % below, readings wobble 15 %
    assert dominated(close, {"fast": best}) is None
    # The same gap with steady readings is beyond the noise.
    steady_best = _series(1000.0, 8, noise=0.01, seed=3)
    steady_close = _series(700.0, 8, noise=0.01, seed=4)
    assert dominated(steady_close, {"fast": steady_best}) is not None


def test_compared_over_the_common_window_only() -> None:
    # The reference ramped up slowly: over the candidate's first 2 s it was slow too.
    ramp = [(5, 100.0), (10, 110.0), (15, 105.0), (20, 95.0), (25, 2000.0), (30, 2100.0)]
    early = [(5, 100.0), (10, 102.0), (15, 98.0), (20, 101.0)]
    assert dominated(early, {"ramp": ramp}) is None


def test_reading_log_thins_and_skips_warmup() -> None:
    log = ReadingLog()

    def p(phase: str, t: float) -> BenchProgress:
        return BenchProgress(phase, 0, 0, 10, t, 100.0)

    assert not log.add(p("warmup", 0.3))
    assert log.add(p("running", 0.2))
    assert not log.add(p("running", 0.4))  # under 0.5 s after the last
    assert log.add(p("running", 0.7))
    assert not log.add(p("done", 3.0))
    assert [s for s, _ in log.readings] == [2, 7]


def test_monitor_never_compares_repeats_of_one_point() -> None:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig

    monitor = PruneMonitor()
    trials = [Trial(EngineConfig(model="m"), Workload()) for _ in range(3)]
    monitor.enrol(trials[0], "p1")
    monitor.enrol(trials[1], "p1")  # a repeat of the same point
    monitor.enrol(trials[2], "p2")
    for i in range(8):
        fast = BenchProgress("running", i, 0, None, 0.5 * (i + 1), 1000.0)
        slow = BenchProgress("running", i, 0, None, 0.5 * (i + 1), 100.0)
        assert monitor.observe(trials[0], fast) is None
        verdict_repeat = monitor.observe(trials[1], slow)
        assert verdict_repeat is None  # its only other reference is its own point
    verdict = None
    for i in range(8):
        slow = BenchProgress("running", i, 0, None, 0.5 * (i + 1), 100.0)
        verdict = monitor.observe(trials[2], slow) or verdict
    assert verdict is not None and verdict.reference in (trials[0].id, trials[1].id)


def _optuna_study() -> tuple[optuna.Study, object]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = make_optuna_pruner()
    return optuna.create_study(direction="maximize", pruner=pruner), pruner


def test_optuna_pruner_prunes_through_report_and_should_prune() -> None:
    study, pruner = _optuna_study()
    fast = study.ask()
    for step, rate in _series(1000.0, 8, seed=1):
        fast.report(rate, step)
    fast.set_user_attr("meets_slo", True)
    study.tell(fast, 1000.0)
    slow = study.ask()
    seen = []
    for step, rate in _series(200.0, 6, seed=2):
        slow.report(rate, step)
        seen.append(slow.should_prune())
    # Not before the 4th reading, then pruned.
    assert seen[:3] == [False, False, False] and seen[-1] is True
    assert pruner.decisions[slow.number].reference == str(fast.number)  # type: ignore[attr-defined]
    study.tell(slow, state=TrialState.PRUNED)


def test_optuna_pruner_ignores_a_reference_that_missed_the_slo() -> None:
    study, _ = _optuna_study()
    fast = study.ask()
    for step, rate in _series(1000.0, 8, seed=1):
        fast.report(rate, step)
    fast.set_user_attr("meets_slo", False)
    study.tell(fast, 1000.0)
    slow = study.ask()
    for step, rate in _series(200.0, 6, seed=2):
        slow.report(rate, step)
    assert slow.should_prune() is False
