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

After a profiled A/B (``P``; issue 29) the note ends with the core's sentence on
why B is faster (``ArmsExplanation.summary``: or why it cannot say) and a table
under it gives each kernel family's ms per output token in A and B and B − A,
as ``tunelab ab --profile`` prints them: the core's figures, only formatted.
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
    from tuner.profiles.explain import Explanation
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


UNEXPLAINED = "unexplained (other ops incl.)"
WHY_COLUMNS = ("family · ms per output token", "A", "B", "B − A")


def why_text(found: ArmsExplanation) -> Text:
    """The core's sentence on why B is faster (a profiled A/B, issue 29), or why it cannot
    say (an arm's profile failed): the note's last line, right above the family table."""
    out = Text("\nwhy: ", style="bold")
    out.append(clean(found.summary()))
    return out


def family_rows(found: Explanation) -> list[tuple[Text, Text, Text, Text]]:
    """The family table's rows, as ``tunelab ab --profile`` prints them: each family's ms per
    output token in A and B and B − A in the core's order (largest change first; families
    neither arm spent time in left out), then what the named families leave unexplained."""
    rows = [
        (
            Text(LABELS[r.family]),
            Text(f"{r.a_ms:.3f}", justify="right"),
            Text(f"{r.b_ms:.3f}", justify="right"),
            Text(f"{r.delta_ms:+.3f}", "green" if r.delta_ms < 0 else "red", justify="right"),
        )
        for r in found.rows
        if r.a_ms or r.b_ms
    ]
    rest = Text(f"{found.unexplained_ms:+.3f}", style="dim", justify="right")
    rows.append((Text(UNEXPLAINED, style="dim"), Text(""), Text(""), rest))
    return rows


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
        # A profiled A/B's why, by kernel family (issue 29); shown only when there is one.
        yield DataTable(id="compare-why", cursor_type="row", zebra_stripes=True)
        yield TunelabFooter(compact=True)

    def on_mount(self) -> None:
        baseline = self.study.baseline()
        pick = self.study.pick_other(baseline.trial, self.b_id) if baseline else None
        title = self.query_one("#compare-title", Static)
        self.query_one("#compare-why", DataTable).display = False
        if baseline is None or pick is None:
            title.update(
                "Compare needs a baseline and another finished config: run, change a knob, run (or A/B)."
            )
            return
        self.comparison = found = self.study.compare(baseline.trial, pick)
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
        self._metrics(found)
        self.guard = found.outputs
        self.query_one("#compare-note", Static).update(self._note(found))
        explained = found.report.explanation
        if explained is not None and explained.explanation is not None:
            self._families(explained.explanation)

    def _metrics(self, found: Comparison) -> None:
        """One row per metric: the 80-column layout joins the verdict to the change."""
        report, table = found.report, self.query_one("#compare-table", DataTable)
        # The level the A/B was judged at (its stored judgement), not a fixed 95%.
        interval = f"B vs A [{report.confidence:.0%} CI]"
        if self.app.size.width < NARROW:
            table.add_columns("metric", "A mean", "B mean", f"{interval} · verdict")
            for row in report.rows:
                table.add_row(row.metric, *narrow_cells(row), key=row.metric)
        else:
            table.add_columns("metric", "A", "B", interval, "verdict")
            for row in report.rows:
                table.add_row(row.metric, *metric_cells(row), key=row.metric)

    def _note(self, found: Comparison) -> Text:
        """The verdict, the guard's, the report's notes, which trials, and a profiled A/B's why."""
        report, guard, one_piece = found.report, found.outputs, one_piece_arms(found)
        source = "A/B" if found.source is ComparisonSource.AB else "POOLED"
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
        note.append(
            f"{source}: {found.provenance()}. A winner is named only when "
            "the whole interval is on one side of 0%. Esc: back"
        )
        if report.explanation is not None:
            note.append_text(why_text(report.explanation))
        return note

    def _families(self, explanation: Explanation) -> None:
        """The family table under the why sentence (Tab reaches it; it scrolls at 80×24)."""
        table = self.query_one("#compare-why", DataTable)
        table.add_columns(*WHY_COLUMNS)
        for cells in family_rows(explanation):
            table.add_row(*cells, key=cells[0].plain)
        table.display = True
