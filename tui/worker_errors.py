"""A background worker that fails says so, with a crash report file, instead of hanging the UI.

Textual's default for a worker error is to exit the app with a traceback
(``exit_on_error=True``), or, with ``exit_on_error=False``, to leave the
worker in the ERROR state with nothing on screen: the GPU panel then reads
"starting…" forever. tunelab's workers run with ``exit_on_error=False`` and
this mixin turns an ERROR state into what the CLI gives for the same error
(issue 19, :mod:`tuner.crash`): a TunelabError as its message and fix; any
other exception written to a crash report file (:func:`tuner.crash.write_crash_report`)
whose path the notification names. The screen that waited on the worker is
told, so it shows the failure rather than a spinner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.worker import Worker, WorkerState

from tuner.errors import TunelabError


def describe_failure(worker: Worker[Any], error: BaseException) -> tuple[str, Path | None]:
    """The user's sentence for a failed worker, and the crash report it wrote (None: a user error)."""
    what = worker.name or worker.group or "background task"
    if isinstance(error, TunelabError):
        fix = f" Fix: {error.fix}" if error.fix else ""
        return f"{what} failed: {error.message}.{fix}", None
    # Deferred: loads only when there is a crash to report.
    from tuner.crash import write_crash_report

    path = write_crash_report(error, ["tunelab", "tui", f"(worker {what})"])
    return f"{what} failed: {type(error).__name__}: {error}. Crash report: {path}", path


class WorkerErrors:
    """``on_worker_state_changed`` for the App (a mixin, like :class:`tui.key_actions.KeyActions`)."""

    crash_reports: list[Path]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is not WorkerState.ERROR:
            return
        app: Any = self
        worker = event.worker
        error = worker.error
        if error is None:
            return
        message, path = describe_failure(worker, error)
        if path is not None:
            app.crash_reports = [*getattr(app, "crash_reports", []), path]
        app.notify(message, severity="error", timeout=30)
        if worker.group == "telemetry":  # the GPU panel waited on it: say why there is none
            app.session.gpu_count = 0
            app.main.telemetry_failed(message)
            app.telemetry_opened(0)  # the app goes on as on a node without GPUs
