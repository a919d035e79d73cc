"""The jobs view (`j`): detached work under the study service, and its output as it grows.

Jobs are tunelab commands started with ``tunelab jobs start`` (issue 18); they
outlive the terminal, so after an SSH drop this is where a new TUI finds them.
The list refreshes every two seconds and the selected job's log follows; all
service calls run in thread workers (they are socket I/O). Rows read as
``tunelab jobs`` prints them: both come from :mod:`tuner.service.view`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, RichLog, Static

from tui.widgets.footer import TunelabFooter
from tuner.foreign_text import clean, one_line
from tuner.service import view


class JobsView(Screen[None]):
    """Every job of this user; Enter follows one's output, `s` stops it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="jobs.close"),
        Binding("s", "stop", "Stop job", id="jobs.stop"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.jobs: list[dict[str, Any]] = []
        self.following: str | None = None
        self.log_offset = 0

    def compose(self) -> ComposeResult:
        yield Static("Jobs · detached tunelab commands (tunelab jobs start -- …)", id="jobs-header")
        yield DataTable(id="jobs-table", cursor_type="row", zebra_stripes=True)
        yield RichLog(wrap=False, markup=False, highlight=False, id="jobs-log")
        yield TunelabFooter(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#jobs-table", DataTable)
        table.add_columns("id", "state", "time", "command")
        table.focus()
        self.refresh_jobs()
        self.set_interval(2.0, self.refresh_jobs)

    @work(thread=True, exclusive=True, group="jobs-list")
    def refresh_jobs(self) -> None:
        # Deferred: the service client (httpx) loads only when jobs are listed.
        from tuner.service.client import ServiceClient

        with ServiceClient() as client:
            try:
                jobs = client.recorded_jobs()
            except Exception as exc:  # a user-visible state, not a crash: the service is optional
                self.app.call_from_thread(self.show_jobs, [], f"service unreachable: {exc}")
                return
            if not jobs:
                self.app.call_from_thread(self.show_jobs, [], "no jobs yet")
                return
            chunk = client.log(self.following, self.log_offset) if self.following else None
        self.app.call_from_thread(self.show_jobs, jobs, None)
        if chunk is not None:
            self.app.call_from_thread(self.show_log, chunk.text, chunk.next_offset)

    def show_jobs(self, jobs: list[dict[str, Any]], problem: str | None) -> None:
        self.jobs = jobs
        table = self.query_one("#jobs-table", DataTable)
        row = table.cursor_row
        table.clear()
        for job in jobs:
            table.add_row(
                Text(one_line(job["id"])),
                view.state_text(job),
                view.age(view.elapsed(job)),
                Text(one_line(job["title"])),  # a command line: plain text, never markup
                key=job["id"],
            )
        if jobs:
            table.move_cursor(row=min(row, len(jobs) - 1))
        running = sum(view.active(j) for j in jobs)
        header = f"Jobs · {len(jobs)} in all, {running} queued or running"
        if problem:
            header = f"Jobs · {problem}"
        if self.following:
            header += f" · following {self.following}"
        self.query_one("#jobs-header", Static).update(header + " · Enter follows · s stops · Esc")

    def show_log(self, text: str, offset: int) -> None:
        if text:
            self.query_one("#jobs-log", RichLog).write(Text(clean(text.rstrip("\n"))))
        self.log_offset = offset

    def _selected(self) -> str | None:
        table = self.query_one("#jobs-table", DataTable)
        if not self.jobs or table.cursor_row < 0:
            return None
        job_id: str = self.jobs[min(table.cursor_row, len(self.jobs) - 1)]["id"]
        return job_id

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        job_id = self._selected()
        if job_id is None or job_id == self.following:
            return
        self.following, self.log_offset = job_id, 0
        self.query_one("#jobs-log", RichLog).clear()
        self.refresh_jobs()

    def action_stop(self) -> None:
        job_id = self._selected()
        if job_id is not None:
            self._stop(job_id)

    @work(thread=True, group="jobs-stop")
    def _stop(self, job_id: str) -> None:
        # Deferred: the service client (httpx) loads only when jobs are listed.
        from tuner.service.client import ServiceClient

        with ServiceClient() as client:
            job = client.stop(job_id)
        self.app.call_from_thread(self.notify, view.job_line(job), title="Stop requested")
        self.refresh_jobs()

    def action_close(self) -> None:
        self.dismiss(None)
