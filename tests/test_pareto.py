"""The Pareto front of (latency, throughput) points."""

from __future__ import annotations

from tuner.studies.pareto import pareto_front


def test_front_keeps_only_undominated_points() -> None:
    points = [(100.0, 50.0), (80.0, 60.0), (120.0, 90.0), (90.0, 40.0), (200.0, 90.0)]
    # (100,50) and (90,40) are dominated by (80,60); (200,90) by (120,90).
    assert pareto_front(points) == [1, 2]


def test_equal_points_are_both_kept_and_empty_input_is_empty() -> None:
    assert pareto_front([(1.0, 1.0), (1.0, 1.0)]) == [0, 1]
    assert pareto_front([]) == []
