"""Two configs side by side with the noise-aware verdict per metric.

A is the study's baseline, B the selected trial (else the newest trial of
another config; never the baseline's own config). The verdict is the core's
(:meth:`tuner.lab.study.Study.compare`): the A/B of exactly these two configs
when the study has one — the same report the Run panel and ``tunelab ab
--json`` give — else every finished trial of each config pooled and judged by
the same function, and the view then says it pooled and lists the trials.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.widgets.results_table import knob_diff
from tuner.lab.study import Comparison, ComparisonSource, Study
from tuner.studies.stats import Comparison as MetricRow
from tuner.studies.stats import Verdict, format_relative

VERDICT_STYLE = {
    Verdict.A_BETTER: "bold red",
    Verdict.B_BETTER: "bold green",
    Verdict.NO_DIFFERENCE: "yellow",
}


def arm_text(row: MetricRow, side: str) -> str:
    """``812.3 ± 4.1 (n=3)``: one arm's mean, spread and sample count."""
    stats = row.a if side == "a" else row.b
    spread = f" ± {stats.std:.3g}" if stats.n > 1 else ""
    return f"{stats.mean:.4g}{spread} (n={stats.n})"


class CompareScreen(Screen[None]):
    """The baseline (A) against a trial (B)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="compare.back")
    ]

    def __init__(self, study: Study, b_id: str | None = None) -> None:
        super().__init__()
        self.study = study
        self.b_id = b_id
        self.comparison: Comparison | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="compare-note")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        baseline = self.study.baseline()
        pick = self.study.pick_other(baseline.trial, self.b_id) if baseline else None
        title = self.query_one("#compare-title", Static)
        if baseline is None or pick is None:
            title.update(
                "Compare needs a baseline and another finished config: run, change a knob, run (or A/B)."
            )
            return
        self.comparison = found = self.study.compare(baseline.trial, pick)
        report = found.report
        title.update(
            Text.assemble(
                ("A ", "bold"),
                f"{baseline.trial.short_id} ({baseline.how} baseline)   ",
                ("B ", "bold"),
                f"{pick.short_id}: {knob_diff(pick, baseline.trial)}",
            )
        )
        table = self.query_one(DataTable)
        table.add_columns("metric", "A", "B", "B vs A [95% CI]", "verdict")
        for row in report.rows:
            table.add_row(
                row.metric,
                arm_text(row, "a"),
                arm_text(row, "b"),
                format_relative(row),
                Text(str(row.verdict), style=VERDICT_STYLE.get(row.verdict, "")),
                key=row.metric,
            )
        source = "A/B" if found.source is ComparisonSource.AB else "POOLED"
        self.query_one("#compare-note", Static).update(
            f"{report.summary()}\n{source}: {found.provenance()}. A winner is named only when "
            "the whole interval is on one side of 0%. Esc: back"
        )
