"""Results: the study's trials as a sortable table, and the throughput/latency plot.

Rows are read from the trial store (every trial of the session's study,
earlier sessions included). ``b`` marks the selected row as the baseline,
``c`` compares it with the baseline, ``e`` exports it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tui.widgets.pareto_plot import ParetoPlot
from tui.widgets.results_table import SORTABLE, ResultsTable
from tui.widgets.status_bar import StatusBar


def study_trials(app: Any) -> list[Any]:
    """Every trial of the session's study from the store (the session's list if none yet)."""
    session = app.session
    try:
        return app.jobs.store.list(study=session.study)
    except Exception:  # the store cannot open (read-only home): the session still knows its trials
        return list(session.trials)


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

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield ResultsTable(id="results-table")
        yield ParetoPlot(id="results-plot")
        yield Static("", id="results-note")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        bar = self.query_one(StatusBar)
        main = self.app.main  # type: ignore[attr-defined]
        src = main.query_one(StatusBar)
        bar.node, bar.vllm, bar.model, bar.engine_state = (
            src.node,
            src.vllm,
            src.model,
            src.engine_state,
        )
        self.reload()

    def reload(self) -> None:
        trials = study_trials(self.app)
        session = self.app.session  # type: ignore[attr-defined]
        baseline = self.app.jobs.baseline()  # type: ignore[attr-defined]
        if baseline is None:
            baseline = next((t for t in trials if t.results), None)
        base_id = baseline.id if baseline is not None else None
        self.query_one(ResultsTable).show(trials, base_id)
        front = self.query_one(ParetoPlot).show(trials)
        done = sum(1 for t in trials if t.results)
        self.query_one("#results-note", Static).update(
            f"study {session.study}: {len(trials)} trials, {done} with results; "
            f"baseline ★ {baseline.short_id if baseline else '–'}; "
            f"Pareto front: {', '.join(t.short_id for t in front) or '–'}. "
            "o: sort · b: baseline · c: compare with baseline · e: export · Esc: back"
        )

    def selected_id(self) -> str | None:
        table = self.query_one(ResultsTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return key.value

    def action_sort(self) -> None:
        self._sort_index = (self._sort_index + 1) % len(SORTABLE)
        column = SORTABLE[self._sort_index]
        self._reverse = column in ("tok_s", "req_s")
        self.query_one(ResultsTable).sort(column, reverse=self._reverse)
        self.notify(
            f"sorted by {column}{' (best first)' if column in ('tok_s', 'req_s', 'ttft', 'itl') else ''}"
        )

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self._reverse = not self._reverse
        event.data_table.sort(event.column_key, reverse=self._reverse)

    def action_mark_baseline(self) -> None:
        trial_id = self.selected_id()
        if trial_id:
            self.app.session.baseline_id = trial_id  # type: ignore[attr-defined]
            self.reload()

    def action_compare(self) -> None:
        from tui.screens.compare import CompareScreen

        self.app.push_screen(CompareScreen(b_id=self.selected_id()))

    def action_export(self) -> None:
        from tui.screens.export import ExportScreen

        self.app.push_screen(ExportScreen(trial_id=self.selected_id()))
