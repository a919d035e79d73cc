"""``tunelab winner``: the best trial of a study, and what the output guard says about it.

The pick is :meth:`tuner.lab.study.Study.winner`'s (the TUI's owner of the
same question); with ``--require-guard same|close`` its candidates are first
filtered against the study's baseline, and the trials left out are named with why. Without it the
winner is still never named without its guard verdict, so a config whose
answers drifted is not exported unawares. Exit status: 0 with a winner, 1 when
no trial qualifies, 2 for input tunelab cannot use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from tuner.cli import options as opt
from tuner.cli.guard_view import guard_json, winner_guard_lines
from tuner.cli.safe_text import clean
from tuner.cli.study_input import split_slo
from tuner.cli.study_options import (
    RequireGuardOpt,
    WinnerObjectiveOpt,
    WinnerSloOpt,
    WinnerStudyOpt,
)
from tuner.cli.study_output import dump, print_winner
from tuner.lab.study import Study
from tuner.trials.guard_check import guard_verdicts

if TYPE_CHECKING:
    from tuner.studies.winner import WinnerReport
    from tuner.trials.guard_check import GuardFilter
    from tuner.trials.model import Trial


def winner_command(
    study: WinnerStudyOpt = None,
    objective: WinnerObjectiveOpt = None,
    slo: WinnerSloOpt = None,
    require: RequireGuardOpt = None,
    store_path: opt.StoreOpt = None,
    as_json: opt.JsonOpt = False,
) -> None:
    """The best trial of a study among those meeting the SLO, with its margin and guard verdict.

    ``--require-guard`` leaves out trials whose outputs drifted from the baseline's.
    """
    constraints, goodput = split_slo("winner", slo)
    if goodput:
        raise opt.usage_error(
            "winner", "--slo here takes METRIC<=VALUE bounds (e.g. p99_ttft_ms<=500)"
        )
    with opt.open_store("winner", store_path, recover=False) as store:
        if study is None:
            studies = store.studies()
            if not studies:
                raise opt.usage_error("winner", f"no trials in {store.path}; run a study first")
            study = max(studies, key=lambda s: s.last_at).name
        try:
            pick = Study(store, study).winner(
                objective,
                constraints if slo else None,
                require,  # type: ignore[arg-type]
            )
        except ValueError as exc:  # --require-guard: not same or close
            raise opt.usage_error("winner", f"--require-guard: {exc}") from None
    if pick.report is None:
        left_out = pick.candidates.note()
        typer.echo(
            f"tunelab winner: {pick.error}" + (f" ({left_out})" if left_out else ""), err=True
        )
        raise typer.Exit(1)
    _print_winner(pick.report, pick.candidates, pick.baseline, as_json)


def _print_winner(
    report: WinnerReport, candidates: GuardFilter, baseline: Trial | None, as_json: bool
) -> None:
    """The winner (tuner.cli.study_output) with its output-guard verdict and what
    ``--require-guard`` left out; in ``--json`` as ``output_guard``."""
    point = report.winner
    named = point.representative()
    guards = guard_verdicts(point.trials, baseline)
    if as_json:
        data = report.to_dict()
        data["output_guard"] = {
            "require": candidates.require,
            "winner": guard_json(next(g for g in guards if g.trial.id == named.id)),
            "runs": {g.trial.id: guard_json(g) for g in guards},
            "left_out": [{"trial": t.id, "why": why} for t, why in candidates.dropped],
        }
        typer.echo(dump(data))
        return
    print_winner(report)
    for line in winner_guard_lines(point.trials, named, guards):
        typer.echo(clean(line))
    note = candidates.note()
    if note:
        typer.echo(clean(note))
