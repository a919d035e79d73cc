"""The capacity search without an engine: doubling then bisection, re-runs, the interval."""

from __future__ import annotations

import math
import random

import pytest

from tuner.studies.capacity import (
    Bracket,
    CapacityError,
    CapacityReport,
    Grid,
    Probe,
    interval,
    launch_result,
)
from tuner.studies.slo import parse_slo

SLO = parse_slo("p99_ttft_ms<=100")


def search(capacity: float, grid: Grid, probes: int = 40, noise: float = 0.0, seed: int = 0):
    """Run the search against a server whose p99 TTFT crosses 100 ms just above ``capacity``."""
    rng = random.Random(seed)
    bracket = Bracket(grid, SLO)
    tried: list[float] = []
    for _ in range(probes):
        units = bracket.next_units()
        load = grid.value(units)
        tried.append(load)
        ttft = (50.0 if load <= capacity else 200.0) * math.exp(rng.gauss(0.0, noise))
        bracket.record(units, {"p99_ttft_ms": ttft})
    return bracket, tried


@pytest.mark.parametrize("true", [1, 2, 3, 7, 48, 63, 64, 65, 100, 1023])
def test_finds_the_exact_boundary_on_a_clean_server(true: int) -> None:
    grid = Grid("concurrency", 1, 1, 1024)
    bracket, tried = search(true, grid, probes=30)
    result = launch_result(0, bracket, [])
    assert result.capacity == true and result.failing == true + 1 and result.converged
    # vLLM's order: doubling from the start until the first miss, then bisection.
    doubling = [2**k for k in range(11) if 2**k <= true] + [2 ** math.ceil(math.log2(true + 1))]
    assert tried[: len(doubling)] == doubling


def test_probe_count_is_logarithmic() -> None:
    grid = Grid("concurrency", 1, 1, 1024)
    bracket = Bracket(grid, SLO)
    count = 0
    while not bracket.converged:
        units = bracket.next_units()
        bracket.record(units, {"p99_ttft_ms": 50.0 if units <= 48 else 200.0})
        count += 1
    assert count == 7 + 5  # 1..64 doubling, then 32..64 halved 5 times (48 56 52 50 49)


def test_after_convergence_the_boundary_is_re_measured_alternately() -> None:
    grid = Grid("concurrency", 1, 1, 64)
    _, tried = search(5, grid, probes=10)
    assert tried[:6] == [1, 2, 4, 8, 6, 5]
    assert sorted(tried[6:]) == [5, 5, 6, 6]


def test_a_lucky_pass_at_the_boundary_is_outvoted_by_its_re_runs() -> None:
    grid = Grid("concurrency", 1, 1, 64)
    bracket = Bracket(grid, SLO)
    for units, ttft in [(1, 50), (2, 50), (4, 50), (8, 300), (6, 90), (7, 300)]:
        bracket.record(units, {"p99_ttft_ms": ttft})
    assert bracket.bounds() == (6, 7)
    bracket.record(6, {"p99_ttft_ms": 150})  # mean 120 > 100: 6 now misses
    assert bracket.bounds() == (4, 6) and not bracket.converged
    assert bracket.next_units() == 5


def test_a_failed_probe_counts_as_a_miss() -> None:
    bracket = Bracket(Grid("concurrency", 1, 1, 64), SLO)
    bracket.record(1, {"p99_ttft_ms": 50})
    bracket.record(2, None)
    assert bracket.bounds() == (1, 2) and bracket.converged


def test_limit_met_means_at_least_the_limit() -> None:
    grid = Grid("concurrency", 1, 1, 20)
    bracket, tried = search(10_000, grid, probes=8)
    result = launch_result(0, bracket, [])
    assert tried[:6] == [1, 2, 4, 8, 16, 20]
    assert result.capped and result.capacity == 20 and result.failing is None


def test_a_failing_start_bisects_down_to_one_step() -> None:
    grid = Grid("concurrency", 1, 16, 1024)
    bracket, tried = search(3, grid, probes=6)
    assert tried[:5] == [16, 8, 4, 2, 3]
    assert launch_result(0, bracket, []).capacity == 3
    nothing, _ = search(0, Grid("concurrency", 1, 1, 8), probes=3)
    assert launch_result(0, nothing, []).capacity == 0


def test_rate_search_on_a_half_request_grid() -> None:
    grid = Grid("rate", 0.5, 0.5, 64)
    bracket, tried = search(3.7, grid, probes=20)
    assert tried[:5] == [0.5, 1.0, 2.0, 4.0, 3.0]
    assert launch_result(0, bracket, []).capacity == 3.5


def test_noise_at_the_boundary_still_lands_near_it() -> None:
    grid = Grid("concurrency", 1, 1, 256)
    for seed in range(5):
        bracket, _ = search(40, grid, probes=16, noise=0.2, seed=seed)
        assert abs(launch_result(0, bracket, []).capacity - 40) <= 1


@pytest.mark.parametrize(
    ("by", "step", "start", "limit"),
    [
        ("users", 1, 1, 8),
        ("concurrency", 0.5, 1, 8),
        ("rate", 0, 1, 8),
        ("concurrency", 1, 16, 8),
        ("rate", 1, 1, math.inf),
    ],
)
def test_bad_grid_is_a_user_error(by: str, step: float, start: float, limit: float) -> None:
    with pytest.raises(CapacityError):
        Grid(by, step, start, limit)  # type: ignore[arg-type]


def test_interval_over_launches() -> None:
    iv = interval([44.0, 48.0, 52.0])
    assert iv.mean == 48.0
    # t(0.975, 2) = 4.303; sd 4; half-width 4.303 * 4 / sqrt(3) = 9.94
    assert iv.low == pytest.approx(48 - 9.937, abs=0.01)
    assert iv.high == pytest.approx(48 + 9.937, abs=0.01)
    one = interval([7.0])
    assert one.low is None and one.high is None
    with pytest.raises(CapacityError):
        interval([])


def test_summary_reads_like_the_issue() -> None:
    grid = Grid("concurrency", 1, 1, 1024)
    launches = []
    for i, true in enumerate([44, 48, 52]):
        bracket, _ = search(true, grid, probes=20)
        launches.append(launch_result(i, bracket, []))
    for lc in launches:  # launch_result takes the probes a real run measured
        lc.probes = [Probe(lc.capacity, True, "t")]
    report = CapacityReport("cap", "concurrency", str(SLO), grid, launches)
    assert report.summary().startswith(
        "max concurrency meeting p99_ttft_ms<=100: 48 [38, 58] (95% interval over 3 launches"
    )
    data = report.to_dict()
    assert data["capacity"]["mean"] == 48.0 and data["capacity"]["confidence_level"] == 0.95
