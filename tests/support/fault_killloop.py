"""The kill loop: SIGKILL a running study at random moments, restart it, and audit each time.

Used by ``tests/test_reliability_kill_study.py`` (a few kills) and
``benchmarks/fault_loops.py`` (many). Each round starts
``tests.support.fault_study`` (tunelab's store, recovery, studies' runner and
trial runner, on the engine double), SIGKILLs it after a random delay (while
importing, recovering, starting an engine, benchmarking or stopping — it
does not pick), then audits: every process it tagged is gone (the reaper's
job, or recovery's), the store opens, and every trial the study reported as
committed is still done with its results. After the last kill the study
runs to completion and the final audit checks each point has exactly one
finished trial.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import fault_procs


@dataclass
class KillLoopFigures:
    """What one kill loop saw.

    Attributes:
        faults: SIGKILLs delivered to a running study process.
        restarts: Study processes started (kills + the final run).
        completed: Trials finished (done) in the store at the end.
        lost: Trials reported committed that were later missing or not done.
        orphans: Tagged processes (engines, reapers) alive 8 s after a kill.
        recovered: Trials a restart found active and marked interrupted.
        store_errors: Restarts at which the store failed to open.
        duplicates: Points with more than one finished trial (resume redid work).
        missing_points: Points without a finished trial at the end.
        stuck_active: Trials still starting/measuring after the final run.
        studies: Studies run (a study that finishes before the kills run out is
            followed by a fresh one in the same store).
        notes: Human-readable details of anything that went wrong.
    """

    faults: int = 0
    restarts: int = 0
    completed: int = 0
    lost: int = 0
    orphans: int = 0
    recovered: int = 0
    store_errors: int = 0
    duplicates: int = 0
    missing_points: int = 0
    stuck_active: int = 0
    studies: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.orphans
            or self.store_errors
            or self.duplicates
            or self.missing_points
            or self.stuck_active
        )


def _start(
    db: Path, study: str, points: int, marker: str
) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    env = {**os.environ, fault_procs.MARKER: marker}
    argv = ["--store", str(db), "--study", study, "--points", str(points)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fault_study", *argv],
        cwd=fault_procs.REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return proc, lines, reader


def _audit(db: Path, committed: dict[str, int], figures: KillLoopFigures) -> None:
    from tuner.trials.model import TrialStatus
    from tuner.trials.store import StoreError, TrialNotFound, TrialStore

    try:
        store = TrialStore(db)
    except StoreError as exc:
        figures.store_errors += 1
        figures.notes.append(f"store did not open: {exc}")
        return
    try:
        for trial_id in committed:
            try:
                trial = store.get(trial_id)
            except TrialNotFound:
                figures.lost += 1
                figures.notes.append(f"committed trial {trial_id} vanished")
                continue
            if trial.status is not TrialStatus.DONE or not trial.results:
                figures.lost += 1
                figures.notes.append(f"committed trial {trial_id} is now {trial.status}")
    finally:
        store.close()


def kill_loop(
    workdir: Path,
    kills: int,
    *,
    points: int = 6,
    seed: int = 0,
    max_delay_s: float = 2.5,
    final_timeout_s: float = 180.0,
) -> KillLoopFigures:
    """Runs the loop; see the module docstring. Blocking."""
    from tuner.trials.model import TrialStatus
    from tuner.trials.store import TrialStore

    rng = random.Random(seed)
    db = workdir / "kill-loop.db"
    marker = fault_procs.new_marker()
    figures = KillLoopFigures()
    committed: dict[str, int] = {}
    studies = 1
    while True:
        proc, lines, reader = _start(db, f"killed-{studies}", points, marker)
        figures.restarts += 1
        final = figures.faults >= kills
        try:
            proc.wait(final_timeout_s if final else rng.uniform(0.05, max_delay_s))
        except subprocess.TimeoutExpired:
            if final:
                proc.kill()
                figures.notes.append("the final run did not finish in time")
            else:
                proc.kill()
                figures.faults += 1
        proc.wait()
        reader.join(5)
        for line in lines:
            parts = line.split()
            if parts[:1] == ["COMMITTED"]:
                committed[parts[1]] = int(parts[2])
            elif parts[:1] == ["RECOVERED"]:
                figures.recovered += 1
            elif parts[:1] == ["Traceback"] or "Error" in line.split(":")[0]:
                figures.notes.append(f"study output: {line}")
        left = fault_procs.wait_untagged(marker, 8.0)
        if left:
            figures.orphans += len(left)
            figures.notes.append(
                f"orphans after round {figures.restarts}: {fault_procs.describe(left)}"
            )
            fault_procs.kill_all(left)
        _audit(db, committed, figures)
        if final:
            break
        if "COMPLETE" in lines:
            studies += 1  # finished before the kills ran out: the next study takes the rest
    with TrialStore(db) as store:
        done = store.list(status=TrialStatus.DONE)
        figures.completed = len(done)
        per_point: dict[tuple[str, int], int] = {}
        for trial in done:
            key = (trial.study, trial.tags.get("point", -1))
            per_point[key] = per_point.get(key, 0) + 1
        figures.duplicates = sum(1 for n in per_point.values() if n > 1)
        figures.missing_points = sum(
            1
            for n in range(1, studies + 1)
            for p in range(1, points + 1)
            if (f"killed-{n}", p) not in per_point
        )
        figures.studies = studies
        active = [t for t in store.list() if t.status.active]
        if active:
            figures.notes.append(f"{len(active)} trial(s) left active after the final run")
            figures.stuck_active += len(active)
    return figures


def timed_kill_loop(workdir: Path, kills: int, **kwargs: object) -> tuple[KillLoopFigures, float]:
    """kill_loop and its wall time in seconds."""
    t0 = time.monotonic()
    figures = kill_loop(workdir, kills, **kwargs)  # type: ignore[arg-type]
    return figures, time.monotonic() - t0
