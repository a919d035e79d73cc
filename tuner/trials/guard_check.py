"""Trials and the output-drift guard: stored runs, the verdict, the runner's reference.

Here, not in tuner.guard, so the guard core never imports the trials package
(tuner.trials imports tuner.guard; the import-linter contracts forbid a cycle).
The rule "which trial is the study's baseline" (and so every trial's guard
reference) lives in ONE function, :func:`choose_baseline`: the faces reach it
through ``tuner.lab.study.Study.baseline()``, the runner (below tuner.lab in the
layers) through :func:`baseline_trial` / :func:`guard_reference`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.guard.compare import Thresholds, compare
from tuner.guard.model import GuardRun, GuardVerdict, Verdict
from tuner.trials.model import Trial
from tuner.trials.store import StoreError, TrialStore

# The study setting (TrialStore.study_setting) naming the baseline the user marked.
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


def choose_baseline(trials: Sequence[Trial], marked: str | None) -> tuple[Trial, bool] | None:
    """The study's baseline among ``trials`` and whether it is the marked one.

    The one rule: the trial the user marked (``marked``, the study setting
    :data:`BASELINE_KEY`) if it is still a finished trial (has results), else
    the first finished trial in ``trials``' order (the store's: oldest first).
    A marked trial that failed or vanished silently gives way to the first,
    so a study always compares against something that was measured.

    Returns:
        (trial, True when it is the marked one), or None without a finished trial.
    """
    done = [t for t in trials if t.results]
    for t in done:
        if marked and t.id == marked:
            return t, True
    return (done[0], False) if done else None


def baseline_trial(store: TrialStore, study: str) -> Trial | None:
    """The study's baseline in ``store`` by :func:`choose_baseline`; None if unreadable or none."""
    try:
        marked = store.study_setting(study, BASELINE_KEY)
        trials = store.list(study=study)
    except StoreError:  # unreadable store: no reference, the guard still runs
        return None
    found = choose_baseline(trials, marked)
    return found[0] if found else None


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
