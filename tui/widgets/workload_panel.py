"""Workload and objective: lengths, concurrency or rate, prompts, SLO.

The fields are derived from :data:`tuner.lab.workload.FIELDS`, the one
declaration the CLI's workload flags also come from, and every edit is parsed
by :func:`tuner.lab.workload.workload_from_texts` — so the panel accepts
exactly what ``tunelab run`` accepts (``infinity`` as a rate included). A bad
field is marked and its sentence posted instead, so Run never starts with a
half-valid workload.

The six fields sit in a grid of label+input cells whose column count follows
the panel's width (three, two or one per row), so a narrow terminal gets
more rows, never inputs squeezed until ``128`` reads ``12`` (issue 13).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Container, Horizontal, Vertical
from textual.events import Resize
from textual.widgets import Input, Label

from tui.messages import WorkloadChanged
from tui.widgets.parking import Parking
from tuner.bench.workload import Workload, WorkloadError
from tuner.lab.workload import FIELDS, workload_from_texts, workload_texts

# Columns of one cell: the longest label, its gap, an input wide enough for a
# 4-digit value and the cursor (app.tcss: min-width 6) and its right margin.
CELL_MIN = max(len(f.label) for f in FIELDS) + 1 + 6 + 1


def columns_for(width: int) -> int:
    """How many label+input cells fit side by side in ``width`` columns (1 to 3)."""
    return max(1, min(3, width // CELL_MIN))


class WorkloadCell(Horizontal, Parking):
    """One field: its label and input; Esc parks focus here, not at the top (B11)."""

    @property
    def control(self) -> Input:
        return self.query_one(Input)


class WorkloadPanel(Vertical):
    """Six compact inputs, three per row where they fit, else two or one."""

    def __init__(self, workload: Workload, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.initial = workload

    def compose(self) -> ComposeResult:
        values = workload_texts(self.initial)
        with Container(id="wl-grid"):
            for field in FIELDS:
                with WorkloadCell(classes="wl-cell"):
                    yield Label(field.label, classes="wl-label")
                    box = Input(
                        values[field.name],
                        id=f"wl-{field.name}",
                        compact=True,
                        classes=f"wl-{field.label}",
                    )
                    box.tooltip = field.help
                    yield box

    def on_mount(self) -> None:
        self.border_title = "Workload"

    def on_resize(self, event: Resize) -> None:
        """Re-flow the cells for the new width (a style change only, no re-compose)."""
        columns = columns_for(self.size.width)  # the content width (event.size is outer)
        grid = self.query_one("#wl-grid")
        if grid.styles.grid_size_columns != columns:
            grid.styles.grid_size_columns = columns
            rows = -(-len(FIELDS) // columns)
            self.styles.height = rows + 2  # and the border

    def texts(self) -> dict[str, str]:
        return {f.name: self.query_one(f"#wl-{f.name}", Input).value for f in FIELDS}

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        try:
            workload = workload_from_texts(
                self.texts(), warmup=self.initial.warmup_requests, seed=self.initial.seed
            )
        except WorkloadError as exc:
            event.input.add_class("-invalid")
            self.border_subtitle = "invalid"
            self.post_message(WorkloadChanged(None, str(exc)))
            return
        for box in self.query(Input):
            box.remove_class("-invalid")
        self.border_subtitle = ""
        self.post_message(WorkloadChanged(workload))
