"""The export dialog: trial (default: the A/B's choice, else the winner), formats, directory.

Files are written by ``tuner.export`` (atomic writes, the TOML verified to
read back as the same config); the dialog shows the launch script it wrote
so the user sees exactly what production will run. The default trial and the
sentence beside it come from :meth:`tuner.lab.study.Study.export_choice`: after
an A/B it is that A/B's report (the figure the Run panel showed), else the
study's winner.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static, TextArea

from tui.widgets.checkbox import StateCheckbox
from tui.widgets.results_table import one_piece_warning
from tuner.export.errors import ExportError
from tuner.lab.study import Study, export_trial

FORMATS = ("toml", "sh", "yaml", "docker")
# Scripts an export writes that do not launch the preset (docker's; AITER's tuning, issue 29).
_NOT_LAUNCH = (".docker.sh", ".aiter-tune.sh")


class ExportScreen(ModalScreen[list[Path] | None]):
    """Choose, write, show."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", id="export.close")]

    def __init__(
        self,
        study: Study,
        trial_id: str | None = None,
        directory: Path | None = None,
        store_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.study = study
        self.store_path = store_path
        self.trial_id = trial_id
        self.directory = directory or Path.cwd() / "tunelab-export"
        self.written: list[Path] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Export a trial as preset + launch script", classes="dialog-title")
            with Horizontal(classes="export-row"):
                yield Label("trial")
                yield Select(
                    [],
                    id="export-trial",
                    allow_blank=True,
                    prompt="no finished trial",
                    compact=True,
                )
            with Horizontal(classes="export-row", id="export-formats"):
                yield Label("formats")
                for name in FORMATS:
                    yield StateCheckbox(
                        name, value=name in ("toml", "sh"), id=f"fmt-{name}", compact=True
                    )
            with Horizontal(classes="export-row"):
                yield Label("directory")
                yield Input(str(self.directory), id="export-dir", compact=True)
            yield Static("", id="export-status")
            yield TextArea("", id="export-script", read_only=True, soft_wrap=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close (Esc)", id="close", compact=True)
                yield Button("Export", id="export", variant="primary", compact=True)

    def on_mount(self) -> None:
        trials = self.study.finished()
        select = self.query_one("#export-trial", Select)
        if not trials:
            self.query_one("#export-status", Static).update(
                "No finished trial yet: run one first (r)."
            )
            return
        best, statement = self.study.export_choice()
        self.statement = statement
        self.query_one("#export-status", Static).update(statement)
        options = [
            (f"{t.short_id}{' (suggested)' if best is not None and t.id == best.id else ''}", t.id)
            for t in trials
        ]
        select.set_options(options)
        default = self.trial_id or (best.id if best is not None else trials[-1].id)
        select.value = default
        # The trial is chosen already: Enter exports it (on the trial list, Enter opens it).
        self.query_one("#export", Button).focus()

    def on_select_changed(self, event: Select.Changed) -> None:
        """The chosen trial's chunk metrics are flagged when its responses came in one piece (B9)."""
        if event.select.id != "export-trial" or event.value is Select.NULL:
            return
        trial = next((t for t in self.study.trials() if t.id == str(event.value)), None)
        results = trial.results if trial is not None else None
        warning = one_piece_warning(trial) if results else None
        text = getattr(self, "statement", "")
        if warning:
            text = f"{text}\n⚠ ITL/TPOT of this trial: {warning}" if text else f"⚠ {warning}"
        self.query_one("#export-status", Static).update(text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the directory field exports (B12: it did nothing)."""
        if event.input.id == "export-dir":
            event.stop()
            self.do_export()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "close":
            self.action_close()
        else:
            self.do_export()

    def do_export(self) -> list[Path]:
        """Write the chosen trial; show the files and the launch script."""
        status = self.query_one("#export-status", Static)
        trial_id = self.query_one("#export-trial", Select).value
        trials = {t.id: t for t in self.study.trials()}
        trial = trials.get(str(trial_id)) if trial_id is not Select.NULL else None
        if trial is None:
            status.update("Choose a trial first.")
            return []
        formats = [n for n in FORMATS if self.query_one(f"#fmt-{n}", Checkbox).value]
        if not formats:
            status.update("Choose at least one format.")
            return []
        directory = Path(self.query_one("#export-dir", Input).value).expanduser()
        try:
            written = export_trial(
                trial, directory, formats, force=True, store_path=self.store_path
            )
        except (ExportError, OSError) as exc:
            status.update(f"Export failed: {exc}")
            return []
        self.written = written
        status.update("Wrote: " + ", ".join(str(p) for p in written))
        script = next(
            (p for p in written if p.name.endswith(".sh") and not p.name.endswith(_NOT_LAUNCH)),
            None,
        )
        shown = script or written[0]
        self.query_one("#export-script", TextArea).text = shown.read_text()
        return written

    def action_close(self) -> None:
        self.dismiss(self.written or None)
