"""The output-drift guard as the CLI shows it: cells, lines and JSON rendered from the core.

Every verdict here is :mod:`tuner.trials.guard_check`'s (``guard_verdicts``,
``ab_guard``, ``require_guard``) against the study's baseline as
:class:`tuner.lab.study.Study` chooses it; this module only gathers the trials
those functions take and turns their answers into text. ``tunelab results``,
the A/B report and ``tunelab winner`` use it, so they say what the study
report and the exported preset say.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tuner.cli.safe_text import markup
from tuner.lab.study import Study
from tuner.trials.guard_check import ab_guard, guard_verdicts

if TYPE_CHECKING:
    from tuner.studies.ab import ABReport
    from tuner.trials.guard_check import ArmsGuard, TrialGuard
    from tuner.trials.model import Trial
    from tuner.trials.store import TrialStore

# Colour per verdict label (TrialGuard.label); anything else is dim.
_STYLE = {"same": "green", "close": "yellow", "drifted": "bold red", "baseline": "cyan"}


def baseline_of(store: TrialStore, study: str) -> Trial | None:
    """The study's baseline trial (tuner.lab.study: marked, else the first finished)."""
    found = Study(store, study).baseline()
    return found.trial if found is not None else None


def study_guards(store: TrialStore, trials: Sequence[Trial]) -> dict[str, TrialGuard]:
    """Each trial's guard verdict against its own study's baseline, by trial id.

    ``trials`` may mix studies (``tunelab results`` without ``--study``): each
    study's trials are judged against that study's baseline.
    """
    by_study: dict[str, list[Trial]] = {}
    for trial in trials:
        by_study.setdefault(trial.study, []).append(trial)
    out: dict[str, TrialGuard] = {}
    for study, members in by_study.items():
        for g in guard_verdicts(members, baseline_of(store, study)):
            out[g.trial.id] = g
    return out


def guard_cell(g: TrialGuard | None) -> str:
    """The results table's cell: the verdict's label, coloured (escaped: labels are ours)."""
    if g is None:
        return "-"
    label = g.label()
    style = _STYLE.get(label, "dim")
    return f"[{style}]{markup(label)}[/]"


def guard_json(g: TrialGuard) -> dict[str, Any]:
    """``guard_verdict`` of a trial in ``--json`` output: the label, its sentence, the reference."""
    return {
        "verdict": g.label(),
        "summary": g.describe(),
        "baseline": g.baseline_id,
    }


def ab_guard_of(store: TrialStore, report: ABReport) -> ArmsGuard:
    """The guard's verdict on an A/B's own arms against the study's baseline.

    The arms are the report's trial ids (``ABReport.trials``) read back from the
    store, as tuner.report.data gathers them for the study report.
    """
    by_id = {t.id: t for t in store.list(study=report.study)}
    arms = {arm: [by_id[i] for i in report.trials.get(arm, []) if i in by_id] for arm in ("A", "B")}
    return ab_guard(arms["A"], arms["B"], baseline_of(store, report.study))


def arms_json(arms: ArmsGuard) -> dict[str, Any]:
    """The A/B's ``output_guard`` in ``--json`` output."""
    return {
        "verdict": str(arms.verdict),
        "summary": arms.summary(),
        "reference": arms.reference.id if arms.reference is not None else None,
    }


def winner_guard_lines(
    point_trials: Sequence[Trial], named: Trial, guards: Sequence[TrialGuard]
) -> list[str]:
    """What the guard says about the winner: the named trial's verdict, then its config's
    other runs when any of them says something else.

    Args:
        point_trials: The winning point's trials (its repeats).
        named: The trial the winner names (the point's representative).
        guards: ``guard_verdicts(point_trials, baseline)``, in the same order.
    """
    by_id = {g.trial.id: g for g in guards}
    mine = by_id[named.id]
    against = f" vs baseline {mine.baseline_id[:8]}" if mine.baseline_id else ""
    lines = [f"output guard{against}: trial {named.short_id}: {mine.describe()}"]
    others = [by_id[t.id] for t in point_trials if t.id != named.id]
    if any(g.label() != mine.label() for g in others):
        lines.append(
            "  other runs of this config: "
            + ", ".join(f"{g.trial.short_id} {g.label()}" for g in others)
        )
    return lines
