"""Trials and the output-drift guard: stored runs, the verdict, the runner's reference.

Here, not in tuner.guard, so the guard core never imports the trials package
(tuner.trials imports tuner.guard; the import-linter contracts forbid a cycle).
The faces find the baseline with ``tuner.lab.study.Study(store, name).baseline()``
and call :func:`trial_verdict`; the runner, below tuner.lab in the layers,
finds the same trial with :func:`baseline_trial`.
"""

from __future__ import annotations

from tuner.guard.compare import Thresholds, compare
from tuner.guard.model import GuardRun, GuardVerdict, Verdict
from tuner.trials.model import Trial
from tuner.trials.store import StoreError, TrialStore

# tuner.lab.study.BASELINE_KEY: the study setting naming a marked baseline.
BASELINE_KEY = "baseline"


def guard_of(trial: Trial) -> GuardRun | None:
    """The trial's stored guard run; a malformed record becomes a run with an error."""
    if trial.guard is None:
        return None
    try:
        return GuardRun.from_dict(trial.guard)
    except (ValueError, TypeError) as exc:
        return GuardRun(model="", max_tokens=0, error=f"stored guard record unreadable: {exc}")


def _unknown(reason: str) -> GuardVerdict:
    return GuardVerdict(Verdict.UNKNOWN, 0.0, (), None, reason)


def trial_verdict(
    baseline: Trial | None, trial: Trial, thresholds: Thresholds | None = None
) -> GuardVerdict | None:
    """The trial's outputs judged against the baseline's; None when the trial has no guard.

    Unknown (with the reason) when the baseline has no usable guard or serves
    another model; a trial compared with itself is **same** by construction
    and callers say "baseline" instead. ``thresholds`` None: the ones the
    trial's guard was run with (GuardSettings), else the defaults.
    """
    cand = guard_of(trial)
    if cand is None:
        return None
    if baseline is None:
        return _unknown("the study has no finished baseline")
    base = guard_of(baseline)
    if base is None:
        return _unknown(f"baseline {baseline.short_id} ran without the guard")
    if baseline.config.model != trial.config.model:
        return _unknown(f"baseline {baseline.short_id} serves another model")
    return compare(base, cand, thresholds or cand.thresholds)


def baseline_trial(store: TrialStore, study: str) -> Trial | None:
    """The study's baseline by tuner.lab.study's rule: the marked one if it is still a
    finished trial (has results), else the first finished trial.

    Duplicated (the runner may not import tuner.lab); tests/test_guard_trials.py
    checks that both agree.
    """
    try:
        marked = store.study_setting(study, BASELINE_KEY)
        done = [t for t in store.list(study=study) if t.results]
    except StoreError:  # unreadable store: no reference, the guard still runs
        return None
    for t in done:
        if marked and t.id == marked:
            return t
    return done[0] if done else None


def guard_reference(store: TrialStore, trial: Trial) -> tuple[str, GuardRun] | None:
    """The study baseline's (id, guard run) to score teacher-forced, when usable.

    None when there is no baseline yet, it is this trial, it has no (usable)
    guard run or it serves another model.
    """
    base = baseline_trial(store, trial.study)
    if base is None or base.id == trial.id or base.config.model != trial.config.model:
        return None
    run = guard_of(base)
    return (base.id, run) if run is not None and run.ok else None
