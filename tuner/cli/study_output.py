"""How the study commands show themselves: a study-level progress bar with ETA, and report tables.

The progress display is the trial display of ``tunelab run`` (stage, request
bar, rolling tok/s) with one more row on top: the study's own bar, advanced
each time a trial reaches a final state, whose ETA comes from the trials
finished so far. Everything draws on stderr so ``--json`` stays clean.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from tuner.cli.explain_table import explanation_table
from tuner.cli.safe_text import markup
from tuner.cli.trial_progress import TrialProgressDisplay, clock
from tuner.lab.reports import (
    Verdict,
    describe_proposal,
    describe_skip,
    format_relative,
    is_pruned,
)
from tuner.trials.events import StudyStatus, TrialDone, TrialFailed, TrialPruned, TrialSkipped

if TYPE_CHECKING:
    from tuner.studies.ab import ABReport
    from tuner.studies.capacity_search import CapacitySearchReport
    from tuner.studies.search import SearchReport
    from tuner.studies.sweep import SweepPoint, SweepReport
    from tuner.studies.winner import WinnerReport
    from tuner.trials.events import TrialEvent
    from tuner.trials.model import Trial


class StudyProgress:
    """A trial display plus a study bar ``kind k/N ETA``; call it with each trial event.

    The study bar follows the study's own ``StudyStatus`` events when the
    study sends them (launches done/total, wave, running/pruned counts, the
    ETA of :class:`tuner.studies.progress.StudyTracker`, each trial row named
    by its slot); before the first one it counts final trial events itself.
    """

    def __init__(
        self, kind: str, total: int, *, show_log: bool = False, skips_extra: bool = False
    ) -> None:
        """Args: skips_extra: a skipped trial does not count towards ``total`` (search)."""

        self._total = total
        self._skips_extra = skips_extra

        self.display: TrialProgressDisplay = TrialProgressDisplay(show_log=show_log)
        self._kind = kind
        self._study = self.display.progress.add_task(
            f"{kind}: {total} trial(s)", total=total, trial="study", rate=""
        )
        self._final: set[str] = set()
        self._tracked = False

    def __enter__(self) -> StudyProgress:
        self.display.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.display.__exit__(*exc)

    def __call__(self, event: TrialEvent) -> None:
        if isinstance(event, StudyStatus):
            self._status(event)
            return
        self.display(event)
        if self._tracked:
            return
        if isinstance(event, TrialDone | TrialFailed | TrialSkipped | TrialPruned):
            trial_id = event.trial.id
            if trial_id not in self._final:
                self._final.add(trial_id)
                if self._skips_extra and isinstance(event, TrialSkipped):
                    self._total += 1
                    self.display.progress.update(self._study, total=self._total)
                self.display.progress.advance(self._study)

    def _status(self, status: StudyStatus) -> None:
        """The study bar from the study's own figures (never raises into the study)."""
        try:
            self._tracked = True
            self.display.progress.update(
                self._study,
                total=max(status.total, 1),
                completed=status.done,
                description=study_line(self._kind, status),
                eta=status.eta_s,
                rate=f"{clock(status.elapsed_s)} elapsed",
            )
            for slot in status.slots:
                if slot.trial_id is not None:
                    self.display.name(slot.trial_id, f"{slot.slot} {slot.label}"[:28])
        except Exception:  # a display glitch must not fail the study
            return


def study_line(kind: str, status: StudyStatus) -> str:
    """``A/B wave 2/3 · 2 running · 1 pruned · look 1 ...`` — the study bar's description."""
    parts = [kind]
    if status.wave is not None and status.waves:
        parts.append(f"wave {status.wave}/{status.waves}")
    parts.append(f"{status.running} running")
    if status.pruned:
        parts.append(f"{status.pruned} pruned")
    if status.failed:
        parts.append(f"[red]{status.failed} failed[/]")
    if status.note:
        parts.append(markup(status.note))
    return " · ".join(parts)


def jsonable(value: Any) -> Any:
    """Infinite/NaN floats as strings, so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def dump(data: Any) -> str:
    return json.dumps(jsonable(data), indent=1)


def _num(value: float | None, spec: str = ",.2f") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def print_ab(report: ABReport) -> None:

    console = Console(highlight=False)
    table = Table(title=f"A/B study {markup(report.study)}", title_justify="left")
    interval = f"B vs A [{report.confidence:.0%} CI]"  # the level the A/B was judged at
    for col in ("metric", "better", "A mean ± sd", "B mean ± sd", interval, "verdict"):
        table.add_column(col, justify="right" if col not in ("metric", "verdict") else "left")
    for row in report.rows:
        color = {Verdict.A_BETTER: "cyan", Verdict.B_BETTER: "green"}.get(row.verdict, "dim")
        color = "dim" if row.withheld else color
        table.add_row(
            markup(row.metric),
            row.direction.value,
            f"{_num(row.a.mean)} ± {_num(row.a.std)} (n={row.a.n})",
            f"{_num(row.b.mean)} ± {_num(row.b.std)} (n={row.b.n})",
            format_relative(row) if not row.withheld else f"not comparable: {row.withheld}",
            f"[{color}]{row.shown_verdict}[/]"
            if not row.withheld
            else f"[dim]{row.shown_verdict}[/]",
        )
    console.print(table)
    for failure in report.failures:
        console.print(f"[red]not measured[/]: {markup(failure)}")
    for note in report.notes:
        if note.startswith("ran: "):  # requested vs effective (tuner.engine.effective)
            console.print(f"[yellow]effective[/]: {markup(note.removeprefix('ran: '))}")
        else:
            console.print(f"[yellow]note[/]: {markup(note)}")
    _print_explanation(console, report)
    console.print(f"[bold]{markup(report.summary())}[/]")


def _print_explanation(console: Console, report: ABReport) -> None:
    """Why B is faster, by kernel family, when the A/B was profiled (issue 29)."""
    found = report.explanation
    if found is None:
        return
    if found.explanation is not None:
        console.print(explanation_table(found.explanation))
        for arm, record in (("A", found.a), ("B", found.b)):
            if record is not None:
                console.print(f"[dim]{arm}: {markup(record.describe())}[/]")
    console.print(f"[yellow]why[/]: {markup(found.summary())}")


def _status(trial: Trial) -> str:
    """A trial's status as tables show it: ``pruned`` for one stopped early as dominated."""
    return "pruned" if is_pruned(trial) else str(trial.status)


def _slo_cell(point: SweepPoint) -> str:
    """met / missed; ``-`` for a point stopped early (pruned) before anything was judged."""
    if point.met_slo:
        return "met"
    if point.trials and all(is_pruned(t) for t in point.trials):
        return "[dim]-[/]"
    return "[red]missed[/]"


def print_sweep(report: SweepReport) -> None:

    console = Console(highlight=False)
    for step in report.steps:
        table = Table(
            title=f"sweep {markup(step.knob)} (study {markup(report.study)})", title_justify="left"
        )
        for col in ("values", report.objective, "SLO", "trials"):
            table.add_column(col)
        for p in step.points:
            mark = (
                " [bold green]<- kept[/]" if p.value == step.best and step.best is not None else ""
            )
            table.add_row(
                markup(" ".join(f"{k}={v}" for k, v in p.values.items())) + mark,
                _num(p.objective(report.objective)),
                _slo_cell(p),
                markup(" ".join(f"{t.short_id}:{_status(t)}" for t in p.trials)),
            )
        console.print(table)
        if step.note:
            console.print(f"[yellow]{markup(step.note)}[/]")
    best = " ".join(f"{k}={v}" for k, v in report.best_values.items()) or "none"
    console.print(f"[bold]best:[/] {markup(best)}  (trial {markup(report.best_trial or '-')})")


def print_search(report: SearchReport) -> None:

    console = Console(highlight=False)
    console.print(
        f"study [bold]{markup(report.study)}[/] in {markup(report.storage)}: "
        f"{report.measured} measured, {report.stopped_early} stopped early (dominated), "
        f"{report.pruned} pruned by the rules, {report.failed} failed"
        + (f", {len(report.recovered)} interrupted point(s) recovered" if report.recovered else "")
        + (
            f", {len(report.skipped)} not launched (the study model is sure they miss the SLO)"
            if report.skipped
            else ""
        )
    )
    for skipped in report.skipped:
        console.print("  " + markup(describe_skip(skipped)))
    if report.proposed:
        met = sum(1 for p in report.proposed if p.get("met_slo"))
        console.print(
            f"{len(report.proposed)} launched as the study model's proposal ({met} met the SLO):"
        )
    for proposed in report.proposed:
        console.print("  " + markup(describe_proposal(proposed)))
    if report.skipped or report.proposed:
        console.print("  (--no-skip: no study model, Optuna's points only)")
    title = "Pareto front" if len(report.objectives) > 1 else "best"
    if not report.best:
        console.print(f"no {title} yet: no finished trial meets the constraints")
    for b in report.best:
        values = ", ".join(
            f"{m}={_num(v)}" for m, v in zip(report.objectives, b["values"], strict=False)
        )
        params = " ".join(f"{k}={v}" for k, v in b["params"].items())
        console.print(
            f"{title}: #{b['number']} {markup(params)} -> {markup(values)} (trial {markup(b['tunelab_trial_id'])})"
        )


def print_capacity_search(report: CapacitySearchReport) -> None:
    """Each searched point's launch capacity, then the best and how to confirm it."""
    table = Table(
        title=f"capacity search {markup(report.study)} at {markup(report.slo)}",
        title_justify="left",
    )
    for name in ("#", "values", "capacity", "probes (✗ = missed)", "note"):
        table.add_column(name)
    best = report.best
    for point in report.points:
        launch = point.launch
        note = launch.failure or ("" if launch.converged else "out of probes")
        table.add_row(
            f"{point.number}{' ★' if point is best else ''}",
            markup(" ".join(f"{k}={v}" for k, v in point.values.items())),
            f"{launch.capacity:g}" if launch.measured else "-",
            markup(", ".join(f"{p.value:g}{'' if p.met else '✗'}" for p in launch.probes)),
            markup(note),
        )
    console = Console(highlight=False)
    console.print(table)
    console.print(markup(report.summary()))


def print_winner(report: WinnerReport) -> None:

    console = Console(highlight=False)
    w = report.winner
    rep = w.representative()
    console.print(
        f"[bold]winner[/] of {markup(report.study)} by {markup(report.objective)}"
        + (f" under {markup(', '.join(report.constraints))}" if report.constraints else "")
        + f": trial {markup(rep.short_id)} (config {rep.config_id}), mean {_num(w.mean)} over {len(w.samples)} run(s)"
    )
    knobs = {**rep.config.env, **{k: v for k, v in rep.config.engine.items()}}
    console.print("  " + markup(" ".join(f"{k}={v}" for k, v in sorted(knobs.items()))))
    varied = rep.tags.get("values")
    if isinstance(varied, dict) and varied:
        console.print("  varied: " + markup(" ".join(f"{k}={v}" for k, v in varied.items())))
    if report.runner_up is not None:
        r = report.runner_up.representative()
        console.print(
            f"runner-up: trial {markup(r.short_id)} (config {r.config_id}), mean "
            f"{_num(report.runner_up.mean)} over {len(report.runner_up.samples)} run(s)"
        )
    console.print(markup(report.statement))
    if report.excluded:
        console.print(
            "[dim]excluded: "
            + markup(", ".join(f"{n} {k}" for k, n in report.excluded.items()))
            + "[/]"
        )
