"""Trials: one config + one workload + an objective, run, measured and stored.

``Trial`` is the record, ``TrialStore`` the crash-safe SQLite store,
``run_trial``/``run_workloads`` the runner, ``slots`` the one-engine-per-GPU
scheduler. Submodules are imported on use so ``import tuner.trials`` stays light.
"""

from tuner.trials.model import DEFAULT_OBJECTIVE, DEFAULT_STUDY, Trial, TrialStatus
from tuner.trials.store import StoreError, TrialNotFound, TrialStore

__all__ = [
    "DEFAULT_OBJECTIVE",
    "DEFAULT_STUDY",
    "StoreError",
    "Trial",
    "TrialNotFound",
    "TrialStatus",
    "TrialStore",
]
