"""The TUI's jobs view (issue 18): a detached job started from the CLI, found and followed in the TUI.

The job is real (``tunelab knobs`` run by the real study service); the rows
are checked against what the service client returns, rendered by the same
core function the CLI uses.
"""

from __future__ import annotations

import os
import signal

import psutil
import pytest
from textual.widgets import DataTable, RichLog

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.screens.jobs import JobsView
from tuner.service import view
from tuner.service.client import ServiceClient


def _stop_service() -> None:
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            if (
                "tuner.service.server" in (proc.info["cmdline"] or [])
                and (proc.info["environ"] or {}).get("TUNELAB_HOME") == os.environ["TUNELAB_HOME"]
            ):
                os.kill(proc.pid, signal.SIGTERM)
        except psutil.Error:
            continue


async def test_jobs_view_lists_and_follows_a_detached_job() -> None:
    with ServiceClient() as client:
        job = client.submit(["knobs"])
    try:
        app = TunelabApp(services=services())
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)
            screen = JobsView()
            await app.push_screen(screen)
            await pilot.pause()
            table = screen.query_one("#jobs-table", DataTable)

            def row_state() -> str | None:
                if table.row_count == 0:
                    return None
                return str(table.get_row(job["id"])[1])

            await wait_for(pilot, lambda: row_state() == "finished", 60, "the job to finish")
            with ServiceClient() as client:
                core = client.job(job["id"])
            assert table.get_row(job["id"])[1] == view.state_text(core)
            assert str(table.get_row(job["id"])[3]) == core["title"] == "tunelab knobs"
            await pilot.press("enter")
            log = screen.query_one("#jobs-log", RichLog)
            await wait_for(pilot, lambda: len(log.lines) > 3, 30, "the job's output")
            text = "\n".join(str(line.text) for line in log.lines)
            assert "max-num-seqs" in text  # `tunelab knobs` lists the catalogue
            await pilot.press("escape")
            assert not isinstance(app.screen, JobsView)
    finally:
        _stop_service()


async def test_a_new_tui_announces_a_running_job_and_j_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The way back after an SSH drop: the new TUI says a job runs; j shows it; s stops it."""
    monkeypatch.setenv("TUNELAB_JOB_ENTRY", "tests.support.slow_job")
    with ServiceClient() as client:
        job = client.submit(["ab", "--repeats", "3"])
    try:
        app = TunelabApp(services=services())
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot)

            def toasts() -> str:
                return " ".join(str(n.message) for n in app._notifications)

            await wait_for(pilot, lambda: "press j" in toasts(), 30, "the running-job notice")
            assert "A detached job is running" in toasts()
            await pilot.press("j")
            await wait_for(pilot, lambda: isinstance(app.screen, JobsView), 10, "the jobs view")
            screen = app.screen
            table = screen.query_one("#jobs-table", DataTable)
            await wait_for(pilot, lambda: table.row_count == 1, 30, "the job's row")
            assert table.get_row(job["id"])[1] == "running"
            await pilot.press("s")
            await wait_for(
                pilot, lambda: table.get_row(job["id"])[1] == "stopped (130)", 40, "the stop"
            )
            with ServiceClient() as client:
                assert client.job(job["id"])["state"] == "stopped"
                assert "slow job stopped" in client.log(job["id"]).text
    finally:
        _stop_service()
