"""Trials and the output-drift guard: stored runs, the verdict, the runner's reference.

Here, not in tuner.guard, so the guard core never imports the trials package
(tuner.trials imports tuner.guard; the import-linter contracts forbid a cycle).
The rule "which trial is the study's baseline" (and so every trial's guard
reference) lives in ONE function, :func:`choose_baseline`: the faces reach it
through ``tuner.lab.study.Study.baseline()``, the runner (below tuner.lab in the
layers) through :func:`baseline_trial` / :func:`guard_reference`.

The answers every face shows are here too: :func:`guard_verdicts` (a verdict
per trial: results table, report), :func:`require_guard` (the winner's
``--require-guard same|close`` filter) and :func:`ab_guard` (the A/B report's
"outputs: ..." line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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
    except (ValueError, TypeError, OverflowError) as exc:
        why = " ".join(str(exc).split())[:200]
        return GuardRun(model="", max_tokens=0, error=f"stored guard record unreadable: {why}")


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
    so a study always compares against something that was measured. A
    capacity probe (``Trial.is_probe``) is never the baseline.

    Returns:
        (trial, True when it is the marked one), or None without a finished trial.
    """
    # A capacity probe measured one load of a search: never what configs are compared with.
    done = [t for t in trials if t.results and not t.is_probe]
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


# -- verdicts as the faces show them -------------------------------------------------
GuardRequirement = Literal["same", "close"]
# Which verdicts meet a --require-guard level (the baseline always does: it is the reference).
_MEETS: dict[str, frozenset[Verdict]] = {
    "same": frozenset({Verdict.SAME}),
    "close": frozenset({Verdict.SAME, Verdict.CLOSE}),
}
# Worst first, for "the worst of an arm's runs".
_SEVERITY = {Verdict.DRIFTED: 0, Verdict.CLOSE: 1, Verdict.SAME: 2}


@dataclass(frozen=True)
class TrialGuard:
    """One trial's guard verdict against its study baseline.

    Attributes:
        trial: The trial.
        verdict: Against the baseline; None when the trial ran without the guard.
        is_baseline: The trial is the reference itself (nothing to compare).
        baseline_id: The id of the trial it was judged against (None: no baseline).
    """

    trial: Trial
    verdict: GuardVerdict | None
    is_baseline: bool = False
    baseline_id: str | None = None

    @property
    def checked(self) -> bool:
        """A real comparison was made (not the baseline, not missing, not unknown)."""
        return (
            not self.is_baseline
            and self.verdict is not None
            and self.verdict.verdict is not Verdict.UNKNOWN
        )

    def meets(self, require: GuardRequirement | None) -> bool:
        """Whether the trial passes ``--require-guard`` (always, when nothing is required)."""
        if require is None or self.is_baseline:
            return True
        return self.checked and self.verdict is not None and self.verdict.verdict in _MEETS[require]

    def label(self) -> str:
        """Short cell text: ``baseline``, ``same``, ``close``, ``drifted``, ``unknown``, ``—``."""
        if self.is_baseline:
            return "baseline"
        return "—" if self.verdict is None else str(self.verdict.verdict)

    def describe(self) -> str:
        """One line for notes: ``drifted on 2/8 prompts from token 3, mean |Δlogprob| 0.0012``."""
        if self.is_baseline:
            return "the baseline (the reference of every other trial's guard)"
        if self.verdict is None:
            return "not checked: the trial ran without the output guard"
        return self.verdict.summary()


def guard_verdicts(
    trials: Sequence[Trial], baseline: Trial | None, thresholds: Thresholds | None = None
) -> list[TrialGuard]:
    """Each trial's verdict against ``baseline`` (from :func:`choose_baseline`), in order."""
    return [
        TrialGuard(
            t,
            trial_verdict(baseline, t, thresholds),
            is_baseline=baseline is not None and t.id == baseline.id,
            baseline_id=baseline.id if baseline is not None else None,
        )
        for t in trials
    ]


@dataclass(frozen=True)
class GuardFilter:
    """The trials that meet a ``--require-guard`` level, and the ones left out with why.

    Attributes:
        require: The level asked (None: nothing is filtered).
        kept: Trials that may be named the winner.
        dropped: (trial, why) for each trial left out.
    """

    require: GuardRequirement | None
    kept: tuple[Trial, ...]
    dropped: tuple[tuple[Trial, str], ...]

    def note(self) -> str | None:
        """``--require-guard same left out 2 trials: 1a2b3c4d (drifted on ...); ...``, or None."""
        if not self.dropped:
            return None
        items = "; ".join(f"{t.short_id} ({why})" for t, why in self.dropped)
        n = len(self.dropped)
        return f"--require-guard {self.require} left out {n} trial{'s' * (n != 1)}: {items}"


def require_guard(
    trials: Sequence[Trial],
    require: GuardRequirement | None,
    baseline: Trial | None,
    thresholds: Thresholds | None = None,
) -> GuardFilter:
    """The winner's candidates under ``--require-guard same|close``.

    Why a filter and not a penalty: a config whose answers changed is a
    different model, not a slower or faster one; ranking it at all would
    need a judgement tunelab cannot make. A trial that cannot show its
    outputs match (no guard, failed guard, another model) is left out too
    when a level is required: unproven is not "same". Unfinished trials pass
    through untouched (the winner's own rules exclude them and say so).

    Raises:
        ValueError: ``require`` is not ``same``, ``close`` or None.
    """
    if require is not None and require not in _MEETS:
        raise ValueError(f"require_guard takes 'same', 'close' or None, not {require!r}")
    kept: list[Trial] = []
    dropped: list[tuple[Trial, str]] = []
    for g in guard_verdicts(trials, baseline, thresholds):
        if not g.trial.results or g.meets(require):
            kept.append(g.trial)
        else:
            dropped.append((g.trial, g.describe()))
    return GuardFilter(require, tuple(kept), tuple(dropped))


@dataclass(frozen=True)
class ArmsGuard:
    """What the guard says about an A/B: B's outputs against A's.

    Attributes:
        reference: The trial every run was compared with (the study baseline if
            given, else A's first run with a usable guard); None without one.
        a: A's other runs against it (their own repeatability).
        b: B's runs against it.
    """

    reference: Trial | None
    a: tuple[TrialGuard, ...]
    b: tuple[TrialGuard, ...]

    @staticmethod
    def _worst(runs: Sequence[TrialGuard]) -> TrialGuard | None:
        checked = [g for g in runs if g.checked and g.verdict is not None]
        if not checked:
            return None
        return min(checked, key=lambda g: _SEVERITY[g.verdict.verdict])  # type: ignore[union-attr]

    @property
    def recorded(self) -> bool:
        """Whether any run of either arm has a guard record (else say nothing about outputs)."""
        return self.reference is not None or any(g.verdict is not None for g in self.b)

    @property
    def verdict(self) -> Verdict:
        """B's worst verdict (unknown when no B run could be compared)."""
        worst = self._worst(self.b)
        return Verdict.UNKNOWN if worst is None or worst.verdict is None else worst.verdict.verdict

    def summary(self) -> str:
        """``outputs: same on 8/8 prompts`` / ``outputs: drifted on 3/16 prompts from token 5``.

        B's worst run speaks for B (one drifted run is drift); unchecked runs
        and A runs that do not reproduce A's own outputs are said too.
        """
        worst = self._worst(self.b)
        if worst is None:
            why = next(
                (g.verdict.reason for g in self.b if g.verdict is not None),
                "no B run has an output-guard record",
            )
            if self.reference is None:
                why = "no A run has a usable output-guard record"
            return f"outputs: not checked ({why})"
        assert worst.verdict is not None
        text = f"outputs: {worst.verdict.summary()}"
        checked = sum(1 for g in self.b if g.checked)
        if len(self.b) > 1:
            text += f" (worst of {checked} B run{'s' * (checked != 1)}"
            text += f"; {len(self.b) - checked} not checked)" if checked < len(self.b) else ")"
        a_worst = self._worst(self.a)
        if a_worst and a_worst.verdict and a_worst.verdict.verdict is not Verdict.SAME:
            text += f"; A's own repeats: {a_worst.verdict.summary()}"
        return text


def ab_guard(
    a: Sequence[Trial],
    b: Sequence[Trial],
    baseline: Trial | None = None,
    thresholds: Thresholds | None = None,
) -> ArmsGuard:
    """The guard's line for an A/B of arms ``a`` and ``b`` (finished or not, in run order).

    ``baseline``: the study's baseline (the runner scored every run against
    its tokens); None takes A's first run with a usable guard, which is
    what :func:`tuner.studies.ab.build_report` has (it is pure).
    """
    ref = baseline
    if ref is None or not _usable(ref):
        ref = next((t for t in a if t.results and _usable(t)), None)
    runs_a = tuple(g for g in guard_verdicts(a, ref, thresholds) if not g.is_baseline)
    runs_b = tuple(g for g in guard_verdicts(b, ref, thresholds) if not g.is_baseline)
    return ArmsGuard(ref, runs_a, runs_b)


def _usable(trial: Trial) -> bool:
    run = guard_of(trial)
    return run is not None and run.ok
