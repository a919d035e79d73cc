"""Two configs side by side with the noise-aware verdict per metric.

A (the baseline) and B (the selected trial, else the newest one) each stand
for every finished trial of the study with the same config and workload —
the repeats of an A/B — so the verdict (``tuner.studies.stats.compare``)
rests on all the samples measured, and says "no significant difference"
when there are too few to tell.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.screens.results import study_trials
from tui.widgets.results_table import knob_diff
from tuner.studies.common import point_key, value_of
from tuner.studies.stats import (
    DEFAULT_METRICS,
    Comparison,
    StatsError,
    Verdict,
    compare,
    format_relative,
)

VERDICT_STYLE = {
    Verdict.A_BETTER: "bold red",
    Verdict.B_BETTER: "bold green",
    Verdict.NO_DIFFERENCE: "yellow",
}


def arm(trials: list[Any], pick: Any) -> list[Any]:
    """The finished trials measuring the same point (config + workload) as ``pick``."""
    key = point_key(pick)
    return [t for t in trials if point_key(t) == key and t.results]


def comparisons(a: list[Any], b: list[Any]) -> list[Comparison]:
    """One comparison per default metric both arms report."""
    rows = []
    for name in DEFAULT_METRICS:
        xs = [v for t in a if (v := value_of(t, name)) is not None]
        ys = [v for t in b if (v := value_of(t, name)) is not None]
        if xs and ys:
            try:
                rows.append(compare(name, xs, ys))
            except StatsError:
                continue
    return rows


def arm_text(c: Comparison, side: str) -> str:
    stats = c.a if side == "a" else c.b
    spread = f" ± {stats.std:.3g}" if stats.n > 1 else ""
    return f"{stats.mean:.4g}{spread} (n={stats.n})"


class CompareScreen(Screen[None]):
    """The baseline (A) against a trial (B)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="compare.back")
    ]

    def __init__(self, b_id: str | None = None) -> None:
        super().__init__()
        self.b_id = b_id

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="compare-note")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        trials = [t for t in study_trials(self.app) if t.results]
        baseline = self.app.jobs.baseline()  # type: ignore[attr-defined]
        if baseline is None and trials:
            baseline = trials[0]
        pick = next((t for t in trials if t.id == self.b_id), None)
        if pick is None and baseline is not None:
            others = [t for t in trials if point_key(t) != point_key(baseline)]
            pick = others[-1] if others else None
        title = self.query_one("#compare-title", Static)
        if baseline is None or pick is None:
            title.update(
                "Compare needs a baseline and another finished config: run, change a knob, run (or A/B)."
            )
            return
        a, b = arm(trials, baseline), arm(trials, pick)
        title.update(
            Text.assemble(
                ("A ", "bold"),
                f"{baseline.short_id} (baseline, n={len(a)})   ",
                ("B ", "bold"),
                f"{pick.short_id} (n={len(b)}): {knob_diff(pick, baseline)}",
            )
        )
        table = self.query_one(DataTable)
        table.add_columns("metric", "A", "B", "B vs A [95% CI]", "verdict")
        rows = comparisons(a, b)
        for c in rows:
            table.add_row(
                c.metric,
                arm_text(c, "a"),
                arm_text(c, "b"),
                format_relative(c),
                Text(str(c.verdict), style=VERDICT_STYLE.get(c.verdict, "")),
                key=c.metric,
            )
        head = rows[0] if rows else None
        note = f"{head.metric}: {head.verdict} ({head.reason})." if head else "no common metric"
        self.query_one("#compare-note", Static).update(
            note + " A winner is named only when the whole interval is on one side of 0%. Esc: back"
        )
