"""The TUI's A/B outlives its terminal (issue 18): hang up mid-A/B, reopen, see the verdict.

The real ``TunelabApp`` runs in a pseudo-terminal (``tests/support/fault_tui.py
--detach``: no engine command is injected, so ``a`` hands the A/B to the real
study service, as in production). Once the job's first launch runs, the
terminal's master side is closed (what sshd does when the connection drops).
Then: the TUI is gone within seconds, the A/B job goes on to its end in the
service, and a new TUI attaches to the study's job and shows the verdict the
core rebuilds from the store (``Study.last_ab``), with nothing left running.

The job runs the study ENGINE DOUBLE (``TUNELAB_JOB_ENTRY=tests.support.study_cli``).
A real vLLM engine launched by a service job is covered once, by
tests/test_studies_engine.py's detached A/B (this file's real-engine variant
cost four minutes of CI for the same service path).
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message
from textual.widgets import RichLog, Static

from tests.support import fault_procs
from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished
from tuner.lab.study import Study
from tuner.service.client import ServiceClient
from tuner.studies.ab import ABReport
from tuner.trials.store import TrialStore


def _tui_job(client: ServiceClient) -> dict[str, Any] | None:
    jobs = [j for j in client.jobs() if (j.get("meta") or {}).get("kind") == "ab"]
    return jobs[-1] if jobs else None


def _started_a_launch(client: ServiceClient, job_id: str) -> bool:
    from tuner.trials.events import TrialStage

    chunk = client.events(job_id)
    return any(isinstance(e, TrialStage) and e.stage == "ready" for e in chunk.events)


def _hang_up_during_ab(home: Path, db: Path, env: dict[str, str]) -> str:
    """Starts the TUI in a pty, runs the A/B, hangs up in its first launch; returns the job
    id once the TUI is gone."""
    args = ["--store", str(db), "--detach"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: become the TUI at once
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.chdir(fault_procs.REPO)
        os.execve(sys.executable, [sys.executable, "-m", "tests.support.fault_tui", *args], env)
    status = None
    try:
        with ServiceClient(start=False) as client:
            deadline = time.monotonic() + 90
            job = None
            while job is None:
                assert time.monotonic() < deadline, "the TUI never handed the A/B to the service"
                os.write(fd, b"a")  # repeated until the app has settled and takes it
                fault_procs.pump_pty(fd, 3.0)
                job = _tui_job(client) if client.running() else None
            deadline = time.monotonic() + 60
            while not _started_a_launch(client, job["id"]):
                assert time.monotonic() < deadline, "the A/B job never brought an engine up"
                fault_procs.pump_pty(fd, 0.5)
        os.close(fd)  # the connection drops: the kernel hangs up the TUI's terminal
        fd = -1
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = code
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the TUI survived the hang-up for 10 s")
    finally:
        fault_procs.end_pty_child(fd, pid, exited=status is not None)
    return str(job["id"])


SEED = ["--model", "tunelab:demo", "--set", "max-num-seqs=4"]
SEED += ["--input-len", "16", "--output-len", "8", "--num-prompts", "8", "--warmup", "0"]


def _seed_baseline(db: Path, env: dict[str, str]) -> None:
    """A finished trial of the TUI's study (the A/B's arm A), run by the CLI on the double."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.study_cli",
            "run",
            "--study",
            "tui",
            "--store",
            str(db),
            *SEED,
        ],
        env=env,
        cwd=fault_procs.REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


async def _reopen_and_read_verdict(db: Path) -> tuple[ABReport, str, list[str]]:
    """A new TUI on the same study and store: what it finishes with, what its panel says, and
    the Run panel's event lines."""
    seen: list[Message] = []
    app = TunelabApp(services=replace(services(double=False), store_path=db))
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await wait_for(
            pilot,
            lambda: any(isinstance(m, JobFinished) for m in seen),
            60,
            "the new TUI to attach and show the A/B's end",
        )
        finished = next(m for m in seen if isinstance(m, JobFinished))
        assert finished.ok, finished.summary
        assert isinstance(finished.result, ABReport)
        await pilot.pause(0.2)
        shown = str(app.main.query_one("#run-figures", Static).render())
        # The title says how the followed job ended, never "running" after its verdict.
        title = str(app.main.run_panel.border_title)
        assert "(detached)" in title and title.endswith(" · done"), title
        assert "running" not in title, title
        events = [strip.text for strip in app.main.query_one("#run-log", RichLog).lines]
    return finished.result, shown, events


def _check_reopened(db: Path, home: Path, job_id: str, report: ABReport, shown: str) -> None:
    with TrialStore(db) as store:
        core = Study(store, "tui").last_ab()
        trials = store.list(study="tui")
        assert Study(store, "tui").job_shown() == job_id
    assert core is not None
    assert report.trials == core.trials and str(report.verdict) == str(core.verdict)
    assert core.summary()[:60] in shown.replace("\n", " "), (shown, core.summary())
    ab_trials = [t for arm in core.trials.values() for t in arm]
    assert len(ab_trials) == 6, core.trials
    by_id = {t.id: t for t in trials}
    assert all(by_id[t].status.value == "done" for t in ab_trials), [
        (t, by_id[t].status) for t in ab_trials
    ]
    assert not [t for t in trials if t.status.active], "a trial was left active"


def _env(home: Path, job_entry: str | None) -> dict[str, str]:
    env = {
        **os.environ,
        "TUNELAB_HOME": str(home),
        "TUNELAB_SERVICE_IDLE": "20",
        "TERM": "xterm-256color",
        "COLUMNS": "160",
        "LINES": "48",
    }
    env.pop("TUNELAB_JOB_ENTRY", None)
    if job_entry:
        env["TUNELAB_JOB_ENTRY"] = job_entry
    return env


async def test_a_tui_ab_outlives_a_hang_up_and_a_new_tui_shows_its_verdict(
    tunelab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tunelab_home
    db = home / "store.db"
    entry = "tests.support.study_cli"
    env = _env(home, entry)
    monkeypatch.setenv("TUNELAB_JOB_ENTRY", entry)
    env["DOUBLE_TOKEN_MS"] = "5"  # each launch lasts long enough to be cut
    _seed_baseline(db, env)
    env["DOUBLE_STARTUP_S"] = "1.5"  # the A/B's engines take a while to start
    try:
        job_id = _hang_up_during_ab(home, db, env)
        with ServiceClient(start=False) as client:
            job = client.job(job_id)
            assert job["state"] in ("queued", "running"), job  # it outlived the terminal
            deadline = time.monotonic() + 180
            while client.job(job_id)["state"] in ("queued", "running"):
                assert time.monotonic() < deadline, "the A/B job did not finish"
                time.sleep(1.0)
            assert client.job(job_id)["state"] == "finished", client.job(job_id)
        report, shown, events = await _reopen_and_read_verdict(db)
        _check_reopened(db, home, job_id, report, shown)
        # The replay keeps the job's own times: each engine's start took what it took in the
        # job (the double's 1.5 s), not the moment the replay took.
        ready = [int(m.group(1)) for e in events if (m := re.search(r"ready after (\d+) s", e))]
        assert len(ready) >= 2 and min(ready) >= 1, events
        assert sum("starting the engine" in e for e in events) == len(ready), events
        left = fault_procs.processes_of(home, {os.getpid(), fault_procs.service_pid(home) or -1})
        assert left == []
    finally:
        service = fault_procs.service_pid(home)
        if service is not None:
            os.kill(service, signal.SIGTERM)


async def test_s_stops_the_detached_ab_in_the_service_and_q_offers_to_leave_it_running(
    tunelab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import Button

    from tui.screens.confirm import ConfirmQuit
    from tuner.trials.events import TrialStage

    db = tunelab_home / "store.db"
    env = _env(tunelab_home, "tests.support.study_cli")
    _seed_baseline(db, env)
    monkeypatch.setenv("TUNELAB_JOB_ENTRY", "tests.support.study_cli")
    monkeypatch.setenv("TUNELAB_SERVICE_IDLE", "20")
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "50")  # a launch lasts long enough to stop it
    seen: list[Message] = []
    app = TunelabApp(services=replace(services(double=False), store_path=db))
    try:
        async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
            await settle(pilot)
            await pilot.press("a")
            await wait_for(pilot, lambda: app.jobs.following is not None, 30, "the job")
            job_id = app.jobs.following
            await wait_for(
                pilot,
                lambda: any(
                    isinstance(getattr(m, "event", None), TrialStage) and m.event.stage == "ready"  # type: ignore[attr-defined]
                    for m in seen
                ),
                60,
                "the job's first engine, as the TUI shows it",
            )
            await pilot.press("q")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmQuit), 10, "the dialog")
            text = " ".join(str(s.render()) for s in app.screen.query(Static))
            assert f"Job {job_id} goes on" in text, text
            assert str(app.screen.query_one("#yes", Button).label) == "Quit (y)"
            await pilot.press("n")
            await pilot.press("s")
            await wait_for(
                pilot, lambda: any(isinstance(m, JobFinished) for m in seen), 60, "the stop"
            )
            finished = next(m for m in seen if isinstance(m, JobFinished))
            assert not finished.ok and f"job {job_id}" in finished.summary, finished.summary
        with ServiceClient(start=False) as client:
            deadline = time.monotonic() + 90
            while client.job(job_id)["state"] in ("queued", "running"):
                assert time.monotonic() < deadline, "the job did not stop"
                time.sleep(0.5)
            assert client.job(job_id)["state"] == "stopped", client.job(job_id)
        with TrialStore(db) as store:
            trials = store.list(study="tui")
        assert not [t for t in trials if t.status.active], [(t.id, t.status) for t in trials]
        assert any(t.status.value == "interrupted" for t in trials), [t.status for t in trials]
        keep = {os.getpid(), fault_procs.service_pid(tunelab_home) or -1}
        assert fault_procs.processes_of(tunelab_home, keep) == []
    finally:
        service = fault_procs.service_pid(tunelab_home)
        if service is not None:
            os.kill(service, signal.SIGTERM)
