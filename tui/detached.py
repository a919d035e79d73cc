"""The TUI's A/B as a study-service job: submitted, followed, and found again after a drop.

An A/B takes many minutes; over SSH the terminal may go first. So the TUI's
``a`` writes the A/B as a spec (tuner.lab.job_spec), hands it to the per-user
study service (tuner.service) and follows the job's event file: the events it
reads are posted as the same ``RunEvent`` messages an in-process A/B posts, so
the Run panel, the progress line and the verdict render exactly as before.
The verdict is the study's last A/B as the store rebuilds it
(:meth:`tuner.lab.study.Study.last_ab`), the one every view reads.

Quitting (or a hang-up) stops following, not the job; a later ``tunelab``
on the same study and store attaches to it (running: its progress replays
and goes on; ended since: its verdict is shown once).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner import policy
from tuner.engine import running
from tuner.errors import TunelabError
from tuner.trials.events import (
    TrialDone,
    TrialEvent,
    TrialFailed,
    TrialPruned,
    TrialSkipped,
    TrialStage,
)
from tuner.trials.model import Trial

if TYPE_CHECKING:
    from tuner.lab.job_spec import ABJobSpec
    from tuner.lab.study import Study
    from tuner.studies.ab import ABReport

POLL_S = 0.5


class DetachedJobError(TunelabError):
    """The detached A/B ended without a verdict (failed, stopped, lost)."""


@dataclass(frozen=True)
class DetachedAB:
    """A TUI A/B job in the service, as a TUI finds it again."""

    job_id: str
    state: str
    repeats: int
    title: str

    @property
    def ended(self) -> bool:
        from tuner.service.jobs import JobState

        return JobState(self.state).ended


def store_field(path: Path | None) -> str | None:
    """The store as a spec and the job's meta name it (None: the user's default store)."""
    return str(path) if path else None


def submit(spec: ABJobSpec, folder: Path) -> DetachedAB:
    """Writes ``spec`` and queues it with the service (started if needed). Blocking: a thread.

    Raises:
        ServiceError: the service cannot be started or refuses the job.
    """
    from tuner.service.client import ServiceClient

    path = spec.write(folder)
    with ServiceClient() as client:
        job = client.submit(
            # The consent this TUI was given travels on the job's command line, never in
            # the spec file (tuner.policy.consent).
            ["jobs", "run-spec", str(path), *policy.granted().flags()],
            title=f"tunelab A/B (TUI) study {spec.study}",
            meta=spec.meta(),
        )
    return DetachedAB(job["id"], job["state"], spec.repeats, job["title"])


def find(jobs: list[dict[str, Any]], study: str, store: Path | None) -> DetachedAB | None:
    """The newest TUI A/B job of ``study`` in ``store`` among the service's ``jobs``."""
    store_key = store_field(store) or ""
    mine = [
        j
        for j in jobs
        if (j.get("meta") or {}).get("kind") == "ab"
        and j["meta"].get("study") == study
        and j["meta"].get("store", "") == store_key
    ]
    if not mine:
        return None
    job = max(mine, key=lambda j: j["submitted"])
    from tuner.lab.job_spec import ABJobSpec  # the spec's module only once a job is found

    return DetachedAB(job["id"], job["state"], ABJobSpec.repeats_of(job["meta"]), job["title"])


async def follow(
    job_id: str,
    emit: Callable[[TrialEvent, float | None], None],
    on_trial: Callable[[Trial], None],
    study: Callable[[], Study],
) -> ABReport:
    """Posts the job's events as they come until it ends; its verdict, or why there is none.

    Cancelling this coroutine stops following; the job goes on (see :func:`stop`).

    Raises:
        DetachedJobError: the job ended without finishing (the message says how it ended).
    """
    from tuner.service.client import ServiceClient

    client = ServiceClient()
    try:
        offset = 0
        while True:
            chunk = await asyncio.to_thread(client.events, job_id, offset)
            for event, at in chunk.stamped:
                emit(event, at)
                if isinstance(event, (TrialDone, TrialFailed, TrialPruned, TrialSkipped)):
                    on_trial(event.trial)
                    if event.trial.engine_pid is not None:  # (an ended engine never counts)
                        running.unfollow(event.trial.engine_pid)
                elif isinstance(event, TrialStage) and event.stage in ("ready", "measuring"):
                    # The job's engine is this study's: the host line counts it, the GPU
                    # panel does not call it foreign.
                    await asyncio.to_thread(_follow_engine, study, event.trial_id)
            offset = chunk.next_offset
            if chunk.ended and not chunk.events:
                break
            if not chunk.events:
                await asyncio.sleep(POLL_S)
        job = await asyncio.to_thread(client.job, job_id)
    finally:
        client.close()
        running.unfollow()
    the_study = study()
    the_study.mark_job_shown(job_id)
    if job["state"] != "finished":
        why = f" ({job['note']})" if job.get("note") else ""
        raise DetachedJobError(
            f"the A/B job {job_id} ended {job['state']}{why} without a verdict",
            fix=f"read its log: tunelab jobs log {job_id}",
        )
    report = the_study.last_ab()
    if report is None:
        raise DetachedJobError(
            f"the A/B job {job_id} finished but study {the_study.name!r} has no A/B in the store",
            fix=f"read its log: tunelab jobs log {job_id}",
        )
    return report


def stop(job_id: str) -> None:
    """Asks the service to stop the job (Ctrl-C to its command: engines stopped, trial marked
    interrupted). Quick; a service that is gone has nothing to stop."""
    from tuner.service.client import ServiceClient, ServiceError

    with ServiceClient(start=False) as client, contextlib.suppress(ServiceError):
        if client.running():
            client.stop(job_id)


def _follow_engine(study: Callable[[], Study], trial_id: str) -> None:
    """Counts the engine the store records for ``trial_id`` (tuner.engine.running.follow)."""
    store = study().store
    if store is None:
        return
    try:
        trial = store.get(trial_id)
    except TunelabError:
        return
    if trial.engine_pid is not None:
        running.follow(trial.engine_pid, trial.engine_created)
