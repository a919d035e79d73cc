"""Workload and objective: lengths, concurrency or rate, prompts, SLO.

The fields are derived from :data:`tuner.lab.workload.FIELDS`, the one
declaration the CLI's workload flags also come from, and every edit is parsed
by :func:`tuner.lab.workload.workload_from_texts` — so the panel accepts
exactly what ``tunelab run`` accepts (``infinity`` as a rate included). A bad
field is marked and its sentence posted instead, so Run never starts with a
half-valid workload.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label

from tui.messages import WorkloadChanged
from tuner.bench.workload import Workload, WorkloadError
from tuner.lab.workload import FIELDS, workload_from_texts, workload_texts


class WorkloadPanel(Vertical):
    """Six compact inputs on two rows."""

    def __init__(self, workload: Workload, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.initial = workload

    def compose(self) -> ComposeResult:
        values = workload_texts(self.initial)
        for row in (FIELDS[:3], FIELDS[3:]):
            with Horizontal(classes="wl-row"):
                for field in row:
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
