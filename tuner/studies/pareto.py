"""The Pareto front of throughput against latency: the trials nothing beats on both.

A trial is on the front when no other trial has at most its latency and at
least its throughput with one of the two strictly better. Shared by the TUI's
plot and anyone ranking a two-objective study outside Optuna.
"""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points not dominated, each point being (latency, throughput).

    Lower latency and higher throughput are better. Equal points are both kept.
    """
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any(
            (x2 <= x and y2 >= y) and (x2 < x or y2 > y)
            for j, (x2, y2) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front
