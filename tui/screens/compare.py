"""Two configs side by side with the noise-aware verdict per metric.

A is the study's baseline, B the selected trial (else the newest trial of
another config; never the baseline's own config). The verdict is the core's
(:meth:`tuner.lab.study.Study.compare`): the A/B of exactly these two configs
when the study has one — the same report the Run panel and ``tunelab ab
--json`` give — else every finished trial of each config pooled and judged by
the same function, and the view then says it pooled and lists the trials.

The report's notes follow the verdict (how many GPU samples were clean, a
busy host, environment and requested-vs-effective differences between the
arms). Two more answers of the core are shown beside the speed verdict: the
output-drift guard's (``Comparison.outputs``: B's outputs against the
baseline's; issue 16), and, where an arm's responses mostly
arrived in one piece (:func:`tuner.bench.metrics.delivery_warning`), its
TPOT/ITL rows say so instead of showing 0 and -100 % (issue 13 B9).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tui.widgets.footer import TunelabFooter
from tui.widgets.results_table import knob_diff, one_piece_warning
from tuner.foreign_text import clean
from tuner.lab.reports import MetricComparison as MetricRow
from tuner.lab.reports import Verdict, format_relative
from tuner.lab.study import Comparison, ComparisonSource, Study
from tuner.profiles.families import LABELS

if TYPE_CHECKING:
    from tuner.studies.ab_explain import ArmsExplanation
    from tuner.trials.guard_check import ArmsGuard

VERDICT_STYLE = {
    Verdict.A_BETTER: "bold red",
    Verdict.B_BETTER: "bold green",
    Verdict.NO_DIFFERENCE: "yellow",
}
GUARD_STYLE = {"same": "green", "close": "cyan", "drifted": "bold red"}


ONE_PIECE_CELL = "⚠ in one piece"


def arm_text(row: MetricRow, side: str) -> str:
    """``812.3 ± 4.1 (n=3)``: one arm's mean, spread and sample count."""
    stats = row.a if side == "a" else row.b
    spread = f" ± {stats.std:.3g}" if stats.n > 1 else ""
    return f"{stats.mean:.4g}{spread} (n={stats.n})"


def one_piece_arms(found: Comparison) -> dict[str, str]:
    """Arm -> the core's warning, for each arm where a trial's responses came in one piece."""
    out: dict[str, str] = {}
    for arm, trials in (("A", found.a), ("B", found.b)):
        warning = next((w for t in trials if (w := one_piece_warning(t))), None)
        if warning:
            out[arm] = warning
    return out


# Below this many columns the table drops spreads and counts (the note keeps n) and
# the verdict joins the change's cell: at 80 the interval and verdict were cut off.
NARROW = 110
SHORT_VERDICT = {
    Verdict.A_BETTER: "A better",
    Verdict.B_BETTER: "B better",
    Verdict.NO_DIFFERENCE: "n.s.",
}


def narrow_cells(row: MetricRow) -> tuple[Text, Text, Text]:
    """A, B and ``B vs A · verdict`` of one metric row in the 80-column layout."""
    wide = metric_cells(row)
    if row.withheld:
        return wide[0], wide[1], wide[2]
    change = Text(f"{format_relative(row)} ")
    change.append(
        SHORT_VERDICT.get(row.verdict, str(row.verdict)), style=VERDICT_STYLE.get(row.verdict, "")
    )
    return Text(f"{row.a.mean:.4g}"), Text(f"{row.b.mean:.4g}"), change


def metric_cells(row: MetricRow) -> tuple[Text, Text, Text, Text]:
    """A, B, B-vs-A and verdict cells of one metric row.

    Where the core withheld the row's verdict (an arm's TPOT/ITL measured a
    starved server: ``Comparison.withheld``), that arm's cell says so and the
    row shows no change and no verdict.
    """
    if not row.withheld:
        return (
            Text(arm_text(row, "a")),
            Text(arm_text(row, "b")),
            Text(format_relative(row)),
            Text(str(row.verdict), style=VERDICT_STYLE.get(row.verdict, "")),
        )
    a = Text(ONE_PIECE_CELL, style="yellow") if "A" in row.one_piece else Text(arm_text(row, "a"))
    b = Text(ONE_PIECE_CELL, style="yellow") if "B" in row.one_piece else Text(arm_text(row, "b"))
    return (
        a,
        b,
        Text(f"not comparable: {row.withheld}", style="dim"),
        Text(row.shown_verdict, style="dim"),
    )


def explanation_text(found: ArmsExplanation) -> Text:
    """Why B is faster (a profiled A/B, issue 29): the core's sentence, then each family's
    B − A in ms per output token on one wrapped line (80 columns hold it in 2-3 rows)."""
    out = Text("why: ", style="bold")
    out.append(f"{clean(found.summary())}\n")
    ex = found.explanation
    if ex is None:
        return out
    parts = [f"{LABELS[r.family]} {r.delta_ms:+.3f}" for r in ex.rows if r.a_ms or r.b_ms]
    parts.append(f"unexplained {ex.unexplained_ms:+.3f}")
    out.append("  by family, B − A ms per output token: " + " · ".join(parts) + "\n", style="dim")
    return out


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
        self.guard: ArmsGuard | None = None
        self.pick_reason: str | None = None  # why B is not the trial under the cursor

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="compare-note")
        yield TunelabFooter(compact=True)

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
        heading = Text.assemble(
            ("A ", "bold"),
            f"{baseline.trial.short_id} ({baseline.how} baseline)   ",
            ("B ", "bold"),
            f"{pick.short_id}: {knob_diff(pick, baseline.trial)}",
        )
        self.pick_reason = self.study.pick_reason(baseline.trial, self.b_id, pick)
        if self.pick_reason:
            heading.append(f"\n⚠ {self.pick_reason}", style="yellow")
        title.update(heading)
        table = self.query_one(DataTable)
        # The level the A/B was judged at (its stored judgement), not a fixed 95%.
        interval = f"B vs A [{report.confidence:.0%} CI]"
        one_piece = one_piece_arms(found)
        if self.app.size.width < NARROW:
            table.add_columns("metric", "A mean", "B mean", f"{interval} · verdict")
            for row in report.rows:
                table.add_row(row.metric, *narrow_cells(row), key=row.metric)
        else:
            table.add_columns("metric", "A", "B", interval, "verdict")
            for row in report.rows:
                table.add_row(row.metric, *metric_cells(row), key=row.metric)
        source = "A/B" if found.source is ComparisonSource.AB else "POOLED"
        self.guard = guard = found.outputs
        note = Text(f"{clean(report.summary())}\n")
        if guard is not None:
            note.append(f"{guard.summary()}\n", style=GUARD_STYLE.get(str(guard.verdict), ""))
        for arm, warning in one_piece.items():
            note.append(f"⚠ {arm}: {warning}\n", style="yellow")
        # The report's other notes (GPU samples clean, busy host, environment and
        # requested-vs-effective differences): beside the verdict they qualify.
        for extra in report.notes:
            if not any(extra.endswith(w) for w in one_piece.values()):
                note.append(f"· {extra}\n", style="dim")
        if report.explanation is not None:
            note.append_text(explanation_text(report.explanation))
        note.append(
            f"{source}: {found.provenance()}. A winner is named only when "
            "the whole interval is on one side of 0%. Esc: back"
        )
        self.query_one("#compare-note", Static).update(note)
