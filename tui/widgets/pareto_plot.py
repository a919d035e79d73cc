"""Throughput against p99 latency, one point per finished trial, with the Pareto front.

Drawn with ``textual-plotext``. The front is the set of trials no other trial
beats on both axes (more tokens/s and less p99 latency;
:func:`tuner.lab.reports.pareto_front`); it is the shortlist of configs worth
exporting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual_plotext import PlotextPlot

from tuner.lab.reports import configs_only, pareto_front
from tuner.trials.model import metric

LATENCY = "p99_e2el_ms"
THROUGHPUT = "output_throughput"


def _padded(values: Sequence[float], share: float = 0.08) -> tuple[float, float]:
    """Axis limits 8 % beyond the data (a 10 % band around a single value)."""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * share or abs(hi) * 0.1 or 1.0
    return lo - pad, hi + pad


class ParetoPlot(PlotextPlot):
    """The scatter and its front."""

    def show(self, trials: Sequence[Any]) -> list[Any]:
        """Plot the finished trials; returns the trials on the front.

        Capacity probes are left out (``configs_only``): each measured one load of
        a search, not a config, so none is a point of the front.
        """
        rows: list[tuple[Any, float, float]] = []
        for t in configs_only(trials):
            latency, throughput = metric(t, LATENCY), metric(t, THROUGHPUT)
            if latency is not None and throughput is not None:
                rows.append((t, latency, throughput))
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("throughput vs p99 latency: trials •, Pareto front ◆ (up and left is better)")
        plt.xlabel("p99 E2E latency (ms)")
        plt.ylabel("tok/s")
        if not rows:
            plt.title("no finished trial yet")
            self.refresh()
            return []
        xs = [r[1] for r in rows]
        ys = [r[2] for r in rows]
        front = pareto_front(list(zip(xs, ys, strict=True)))
        # Pad the axes: a point on the frame would be drawn over by it.
        plt.xlim(*_padded(xs))
        plt.ylim(*_padded(ys))
        plt.scatter(
            xs, ys, marker="dot"
        )  # no legend: it would cover the top-left corner, where the best points are
        fx = sorted((xs[i], ys[i]) for i in front)
        plt.plot([p[0] for p in fx], [p[1] for p in fx], marker="◆")
        self.refresh()
        return [rows[i][0] for i in front]
