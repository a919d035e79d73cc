"""The lab's report vocabulary: the types its functions return, for the faces to read.

The lab's study functions (:mod:`tuner.lab.run`, :mod:`tuner.lab.study`,
:mod:`tuner.lab.capacity`) return reports whose classes the studies define
(:mod:`tuner.studies.ab`, ``capacity``, ``sweep``, ``stats``). A face that needs
one of them at run time (an ``isinstance`` on a job's result, the
:class:`Verdict` values it styles, the per-metric :class:`MetricComparison` row
it lays out) imports it from here: the faces read the lab's public vocabulary,
the studies define it, and no face imports a module that decides.

Beside the types, the few readings of a study the faces show, each delegating
to its one owner in the studies so both faces say the same:

- :func:`format_relative`: a metric row's relative difference as text;
- :func:`ab_schedule`: the order of an A/B's launches (the Run panel's plan);
- :func:`pareto_front`: the trials no other beats on both latency and throughput;
- :func:`is_pruned`: whether a trial was stopped early by the study's pruner;
- :func:`describe_skip`: a point a search did not launch, and the model's reason;
- :func:`describe_proposal`: a point a search launched as the model's proposal;
- :func:`configs_only`, :func:`probe_view`, :class:`CapacityStep`: capacity
  probes kept apart from the configs' trials, each with its load and ✓/✗, and
  grouped by launch (:mod:`tuner.studies.capacity_steps`).

Importing this module loads those study modules (a few light ones, no engine,
no Optuna); faces that must not pay for them at start-up import it when first used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.studies import ab as _ab
from tuner.studies import pareto as _pareto
from tuner.studies import pruning as _pruning
from tuner.studies import search_propose as _search_propose
from tuner.studies import search_skip as _search_skip
from tuner.studies import stats as _stats
from tuner.studies.ab import ABReport
from tuner.studies.capacity import CapacityReport
from tuner.studies.capacity_steps import CapacityStep, ProbeView, configs_only, probe_view
from tuner.studies.stats import Comparison as MetricComparison
from tuner.studies.stats import Verdict
from tuner.studies.sweep import SweepReport
from tuner.trials.model import Trial

__all__ = [
    "ABReport",
    "CapacityReport",
    "CapacityStep",
    "MetricComparison",
    "ProbeView",
    "SweepReport",
    "Verdict",
    "ab_schedule",
    "configs_only",
    "describe_proposal",
    "describe_skip",
    "format_relative",
    "is_pruned",
    "pareto_front",
    "probe_view",
]


def format_relative(row: MetricComparison) -> str:
    """B relative to A with its interval, ``+12.3% [+8.1%, +16.5%]``, as every report writes it.

    Args:
        row: One metric's comparison (a row of :attr:`ABReport.rows`).

    Returns:
        The text of :func:`tuner.studies.stats.format_relative`.
    """
    return _stats.format_relative(row)


def ab_schedule(repeats: int) -> list[tuple[str, int]]:
    """The launch order of an A/B with ``repeats`` launches per arm, as the lab runs it.

    The counterbalanced ``abba`` order of :func:`tuner.studies.ab.schedule`, the
    default of :class:`tuner.lab.plans.ABPlan` and so of :func:`tuner.lab.run.ab`.

    Args:
        repeats: Launches per arm (1 or more).

    Returns:
        ``(arm, repeat)`` pairs in run order, the repeat counted from 0.

    Raises:
        ABError: ``repeats`` is below 1 (a TunelabError).
    """
    return _ab.schedule(repeats)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the ``(latency, throughput)`` points that no other point beats on both.

    Lower latency and higher throughput are better; equal points are both kept
    (:func:`tuner.studies.pareto.pareto_front`).

    Args:
        points: One ``(latency, throughput)`` pair per trial.

    Returns:
        The indices of the points on the front, in the order given.
    """
    return _pareto.pareto_front(points)


def describe_proposal(entry: Mapping[str, Any]) -> str:
    """A search report's proposed point, why, and what it measured
    (tuner.studies.search_propose decides)."""
    return _search_propose.describe_proposal(entry)


def describe_skip(entry: Mapping[str, Any]) -> str:
    """A search report's skipped point and why (tuner.studies.search_skip decides)."""
    return _search_skip.describe_skip(entry)


def is_pruned(trial: Trial) -> bool:
    """True when the study's pruner stopped ``trial`` early (tuner.studies.pruning decides)."""
    return _pruning.is_pruned(trial)
