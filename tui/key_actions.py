"""The app's own key actions: key help, jump to a knob, the engine log, the study report.

A mixin of :class:`tui.app.TunelabApp`. It imports the screens it opens; those
screens read the table of actions in :mod:`tui.commands`, which imports none
of them, so the import graph stays a DAG.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, SystemCommand
from textual.screen import Screen

from tui.commands import ACTIONS, jump_to_knob
from tuner import knobs as catalogue
from tuner import paths
from tuner.errors import TunelabError

# Where `p` writes the study report: the CLI's default folder (tunelab report --out).


class KeyActions:
    """The app's key-help, knob-jump, engine-log and report actions (mixed into the App).

    Kept apart from the App class, which stays orchestration, and from the
    table of actions in :mod:`tui.commands`, which the screens pushed here
    read. The screens are imported when first opened (start-up time).
    """

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's palette commands, minus those that duplicate ours (Quit, Keys).

        Textual's "Keys" panel and "Quit" would sit beside tunelab's own Keys
        (the help screen) and Quit (which asks first and stops the engine).
        """
        ours = {spec.title for spec in ACTIONS}
        for command in App.get_system_commands(self, screen):  # type: ignore[arg-type]
            if command.title not in ours:
                yield command

    def action_help(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.help import KeyHelp

        app: Any = self
        if not isinstance(app.screen, KeyHelp):
            app.push_screen(KeyHelp())

    def action_find_knob(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.knob_jump import KnobJump

        # Deferred: the panel imports tui.messages, which imports this module.
        from tui.widgets.knob_panel import KnobPanel

        app: Any = self
        # From the catalogue, not the mounted rows: late groups may still be mounting.
        version, platform = app.main.query_one(KnobPanel).target or (None, None)
        available = {k.key: catalogue.available(k, version, platform).ok for k in catalogue.KNOBS}

        def chosen(key: str | None) -> None:
            if key:
                # After the dialog is gone and the main screen got its focus back.
                app.call_after_refresh(jump_to_knob, app, key)

        app.push_screen(KnobJump(available), chosen)

    def action_engine_log(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.log_view import LogView

        app: Any = self
        if not isinstance(app.screen, LogView):
            app.push_screen(LogView(app.main.run_panel.engine_log))

    def action_jobs(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.jobs import JobsView

        app: Any = self
        if not isinstance(app.screen, JobsView):
            app.push_screen(JobsView())

    @work(thread=True, group="jobs-check", exit_on_error=False)
    def announce_jobs(self) -> None:
        """At start-up: say so when detached jobs run (the way back after an SSH drop), and
        attach to this study's A/B job when it runs or ended since a TUI last showed it."""
        # Deferred: the service client (httpx) loads only when jobs are listed.
        from tui import detached
        from tuner.service import view
        from tuner.service.client import ServiceClient, ServiceError

        app: Any = self
        session = app.session
        try:
            with ServiceClient() as client:
                # A service that ended itself while idle is restarted only when it has a table:
                # an A/B that finished while nobody watched is found the same way.
                jobs = client.recorded_jobs()
        except ServiceError:
            return
        found = detached.find(jobs, session.study, session.services.store_path)
        active = [j for j in jobs if view.active(j)]
        if found is not None:
            app.call_from_thread(app.jobs.attach_if_new, found)
            active = [j for j in active if j["id"] != found.job_id]
        if active:
            many = f"{len(active)} detached jobs are" if len(active) > 1 else "A detached job is"
            app.call_from_thread(app.notify, f"{many} running: press j to follow.", timeout=10)

    def action_report(self) -> None:
        app: Any = self
        app.notify("Writing the study report…", timeout=3)
        self.write_report(paths.reports_dir(app.session.study))

    @work(thread=True, exclusive=True, group="report", exit_on_error=False)
    def write_report(self, out: Path) -> None:
        """``tunelab report --study <session's> --out <out>``, off the event loop.

        matplotlib and the renderers take seconds on a small box: a thread keeps
        keys answered. A user error (no trials, unwritable folder) is its message
        and fix; anything else reaches the app's worker-error handler.
        """
        # Deferred: the report writers (matplotlib) load only when a report is made.
        from tuner.report import write_report

        app: Any = self
        session = app.session
        try:
            written = write_report(out, study=session.study, store_path=session.services.store_path)
        except TunelabError as exc:
            fix = f" Fix: {exc.fix}" if exc.fix else ""
            app.call_from_thread(
                app.notify, f"Report not written: {exc.message}.{fix}", severity="error", timeout=10
            )
            return
        app.last_report = written
        app.call_from_thread(
            app.notify,
            f"Report written: {written.html} and {written.markdown} ({written.trials} trials)",
            timeout=15,
        )
