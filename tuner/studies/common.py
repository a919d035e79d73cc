"""What every study shares for reading results: values, SLOs, point identity, names.

Pure functions over stored trials; executing trials lives in
:mod:`tuner.studies.executor`, so code that only reads a study (the TUI at
start, the report, ``winner``) never loads the engine and benchmark stack.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from tuner.studies.space import Constraint
from tuner.trials.model import Trial, TrialStatus, metric


def study_name(kind: str) -> str:
    """A fresh, sortable study name such as ``ab-20261122-021500``."""
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def value_of(trial: Trial, key: str) -> float | None:
    """A numeric result of a finished trial (None when absent or the trial did not finish)."""
    if trial.status is not TrialStatus.DONE:
        return None
    return metric(trial, key)


def representative(trials: Sequence[Trial], objective: str) -> Trial:
    """The trial to show or export for a group of repeats: the one nearest their mean on
    ``objective`` (never the luckiest); the first when none measured it."""
    measured = [(t, v) for t in trials if (v := value_of(t, objective)) is not None]
    if not measured:
        return trials[0]
    mean = sum(v for _, v in measured) / len(measured)
    return min(measured, key=lambda tv: abs(tv[1] - mean))[0]


def meets(trial: Trial, constraints: Iterable[Constraint]) -> bool:
    """True when the trial finished and every SLO constraint holds on its results."""
    if trial.status is not TrialStatus.DONE:
        return False
    return all(c.met(value_of(trial, c.metric)) for c in constraints)


def point_key(trial: Trial) -> str:
    """Identity of a measured point: the same config under the same workload."""
    return trial.config_id + ":" + json.dumps(trial.workload.to_dict(), sort_keys=True)


def describe_values(values: dict[str, Any]) -> str:
    """``max-num-seqs=64 concurrency=32`` for tables and logs."""
    return " ".join(f"{k}={v}" for k, v in values.items()) or "(base config)"
