"""Results: the study's trials as a sortable table, and the throughput/latency plot.

Rows are read from the trial store (every trial of the session's study,
earlier sessions included) through :class:`tuner.lab.study.Study`, which also
keeps the baseline (``b`` marks the selected row; kept across restarts). ``c``
compares the selected row with the baseline (never the baseline with itself),
``e`` exports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tui.screens.compare import CompareScreen
from tui.screens.export import ExportScreen
from tui.widgets.footer import TunelabFooter
from tui.widgets.pareto_plot import ParetoPlot
from tui.widgets.results_table import SORTABLE, STEP_KEY, ResultsTable
from tui.widgets.status_bar import StatusBar
from tuner.lab.study import Study, higher_is_better
from tuner.trials.store import StoreError, TrialNotFound

# The metric behind each sortable column (direction from tuner.lab.study.higher_is_better).
_COLUMN_METRIC = {
    "tok_s": "output_throughput",
    "req_s": "request_throughput",
    "ttft": "p99_ttft_ms",
    "itl": "p99_itl_ms",
}


class ResultsScreen(Screen[None]):
    """Table + plot."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="results.back"),
        Binding("b", "mark_baseline", "Baseline", id="results.baseline"),
        Binding("c", "compare", "Compare", id="results.compare"),
        Binding("e", "export", "Export", id="results.export"),
        Binding("o", "sort", "Sort", id="results.sort"),
    ]

    _sort_index = 0
    _reverse = False
    _shown_width = 0  # the width the table was last laid out for

    def __init__(
        self, study: Study, header: StatusBar | None = None, store_path: Path | None = None
    ) -> None:
        """``header``: the main screen's status bar, whose values this screen's bar repeats."""
        super().__init__()
        self.study = study
        self.header = header
        self.store_path = store_path

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield ResultsTable(id="results-table")
        yield Static("", id="results-detail")
        yield ParetoPlot(id="results-plot")
        yield Static("", id="results-note")
        yield TunelabFooter(compact=True)

    def on_mount(self) -> None:
        if self.header is not None:
            bar, src = self.query_one(StatusBar), self.header
            bar.node, bar.vllm, bar.model, bar.engine_state = (
                src.node,
                src.vllm,
                src.model,
                src.engine_state,
            )
        self.reload()

    def reload(self) -> None:
        trials = self.study.trials()
        baseline = self.study.baseline(trials)
        steps = self.study.capacity_steps(trials)
        table = self.query_one(ResultsTable)
        table.show(
            trials,
            baseline.trial.id if baseline else None,
            self.study.guards(trials),
            steps,
            width=self.app.size.width,
        )
        self._shown_width = self.app.size.width
        self._show_detail()
        front = self.query_one(ParetoPlot).show(trials)
        done = sum(1 for t in trials if t.results)
        probes = sum(len(step.probes) for step in steps)
        held = f" ({probes} of them capacity probes in {len(steps)} launches)" if steps else ""
        self.query_one("#results-note", Static).update(
            f"study {self.study.name}: {len(trials)} trials{held}, {done} with results; "
            f"baseline {baseline.describe() if baseline else '★ –'}; "
            f"Pareto front: {', '.join(t.short_id for t in front) or '–'}."
        )

    def on_resize(self) -> None:
        """Another width fits other columns and another config room (results_table.layout)."""
        if self.app.size.width != self._shown_width:
            self.reload()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.row_key.value)

    def _show_detail(self, key: str | None = None) -> None:
        """The highlighted row in full (the columns a narrow table leaves out, every knob)."""
        table = self.query_one(ResultsTable)
        key = key if key is not None else self.selected_id()
        detail = table.details.get(key or "")
        self.query_one("#results-detail", Static).update(detail if detail is not None else "")

    def selected_id(self) -> str | None:
        """The row key under the cursor: a trial id, or a capacity launch's (``STEP_KEY…``)."""
        table = self.query_one(ResultsTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return key.value

    def _on_step_row(self) -> bool:
        """Whether the cursor is on a capacity launch's row, which no trial action applies to."""
        selected = self.selected_id()
        if selected is None or not selected.startswith(STEP_KEY):
            return False
        self.notify(
            "this row is a capacity launch, not a trial: move to one of its probes, or to a "
            "trial of a run, A/B or sweep",
            severity="warning",
        )
        return True

    def action_sort(self) -> None:
        self._sort_index = (self._sort_index + 1) % len(SORTABLE)
        column = SORTABLE[self._sort_index]
        metric = _COLUMN_METRIC.get(column)
        self._reverse = metric is not None and higher_is_better(metric)
        self.query_one(ResultsTable).sort(column, reverse=self._reverse)
        self.notify(f"sorted by {column}{' (best first)' if metric else ''}")

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self._reverse = not self._reverse
        event.data_table.sort(event.column_key, reverse=self._reverse)

    def action_mark_baseline(self) -> None:
        trial_id = self.selected_id()
        if not trial_id or self._on_step_row():
            return
        try:
            chosen = self.study.mark_baseline(trial_id)
        except (TrialNotFound, StoreError) as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(f"Baseline: {chosen.describe()} (kept for study {self.study.name})")
        self.reload()

    def action_compare(self) -> None:
        if self._on_step_row():
            return
        self.app.push_screen(CompareScreen(self.study, b_id=self.selected_id()))

    def action_export(self) -> None:
        if self._on_step_row():
            return
        self.app.push_screen(
            ExportScreen(self.study, trial_id=self.selected_id(), store_path=self.store_path)
        )
