"""The kill loop on ``tunelab tune``: SIGKILL a resumable Optuna search, restart it, audit.

Where ``fault_killloop.py`` drives the store and runner with its own tiny
study, this loop kills tunelab's *own* resumable study command — ``tunelab
tune`` run through ``tests/support/study_cli.py`` (the real CLI with the
study engine double as its engine) — and checks the two stores against each
other after every kill:

- the tunelab trial store opens, and every trial once seen done is still done;
- the Optuna storage opens; every COMPLETE Optuna trial points to a done
  tunelab trial (no value without its measurement);
- a tunelab trial that finished (done, with results) is never told FAIL in
  the study: that would drop a completed measurement from the study's
  ranking although it is in the store ("dropped" below);
- no engine or reaper survives a kill.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import fault_procs

STUDY = "kill-tune"
ARGS = [
    "tune",
    "--param",
    "max-num-seqs=1,2,4,8",
    "--study",
    STUDY,
    "--model",
    "engine-double",
    "--input-len",
    "8",
    "--output-len",
    "16",
    "--num-prompts",
    "8",
    "--concurrency",
    "4",
    "--warmup",
    "0",
]


@dataclass
class TuneLoopFigures:
    """What one loop over ``tunelab tune`` saw (see the module docstring)."""

    faults: int = 0
    restarts: int = 0
    completed: int = 0
    optuna_complete: int = 0
    lost: int = 0
    dropped: int = 0
    inconsistent: int = 0
    orphans: int = 0
    store_errors: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.dropped or self.inconsistent or self.orphans or self.store_errors
        )


def _optuna_trials(url: str) -> list[Any]:
    import optuna

    from tuner.studies.search import sqlalchemy_url

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(sqlalchemy_url(url))
    try:
        return optuna.load_study(study_name=STUDY, storage=storage).get_trials(deepcopy=False)
    except KeyError:
        return []  # killed before the study was created
    finally:
        storage.remove_session()


def _audit(
    home: Path, url: str, seen_done: set[str], figures: TuneLoopFigures, final: bool
) -> None:
    from optuna.trial import TrialState

    from tuner.trials.model import TrialStatus
    from tuner.trials.store import StoreError, TrialStore

    db = home / "data" / "tunelab.db"
    if not db.exists():
        return
    try:
        with TrialStore(db) as store:
            trials = {t.id: t for t in store.list(STUDY)}
    except StoreError as exc:
        figures.store_errors += 1
        figures.notes.append(f"tunelab store: {exc}")
        return
    try:
        frozen = _optuna_trials(url)
    except Exception as exc:  # the storage must open after any kill
        figures.store_errors += 1
        figures.notes.append(f"optuna storage: {type(exc).__name__}: {exc}")
        return
    for trial_id in seen_done:
        t = trials.get(trial_id)
        if t is None or t.status is not TrialStatus.DONE or not t.results:
            figures.lost += 1
            figures.notes.append(f"done trial {trial_id} is now {t and t.status}")
    seen_done |= {i for i, t in trials.items() if t.status is TrialStatus.DONE}
    by_id = {f.user_attrs.get("tunelab_trial_id"): f for f in frozen}
    figures.inconsistent = 0
    figures.dropped = 0
    for f in frozen:
        linked = trials.get(f.user_attrs.get("tunelab_trial_id"))
        if f.state is TrialState.COMPLETE and (
            linked is None or linked.status is not TrialStatus.DONE
        ):
            figures.inconsistent += 1
            figures.notes.append(
                f"optuna #{f.number} COMPLETE but tunelab trial is {linked and linked.status}"
            )
    for trial_id in seen_done:
        f = by_id.get(trial_id)
        if f is not None and f.state is TrialState.FAIL:
            figures.dropped += 1
            if final:
                figures.notes.append(
                    f"tunelab trial {trial_id} is done with results, but the study told "
                    f"optuna #{f.number} FAIL (interrupted={f.user_attrs.get('interrupted')})"
                )
    if final:
        figures.completed = len(seen_done)
        figures.optuna_complete = sum(1 for f in frozen if f.state is TrialState.COMPLETE)


def tune_kill_loop(
    workdir: Path, kills: int, *, seed: int = 0, max_delay_s: float = 5.0, trials_per_run: int = 3
) -> TuneLoopFigures:
    """Kills ``tunelab tune`` ``kills`` times at random, then lets it finish; blocking."""
    rng = random.Random(seed)
    home = workdir / "home"
    url = f"sqlite:///{workdir / 'optuna.db'}"
    marker = fault_procs.new_marker()
    env = {
        **os.environ,
        "TUNELAB_HOME": str(home),
        "DOUBLE_TOKEN_MS": "2",
        "COLUMNS": "200",
        fault_procs.MARKER: marker,
    }
    figures = TuneLoopFigures()
    seen_done: set[str] = set()
    while True:
        final = figures.faults >= kills
        argv = [*ARGS, "--storage", url, "--trials", str(trials_per_run)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.study_cli", *argv],
            cwd=fault_procs.REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        figures.restarts += 1
        try:
            _, err = proc.communicate(timeout=240 if final else rng.uniform(0.5, max_delay_s))
            if proc.returncode != 0:
                figures.notes.append(f"tune exited {proc.returncode}: {err[-300:]}")
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            figures.faults += 1
        left = fault_procs.wait_untagged(marker, 8.0)
        if left:
            figures.orphans += len(left)
            figures.notes.append(f"orphans: {fault_procs.describe(left)}")
            fault_procs.kill_all(left)
        _audit(home, url, seen_done, figures, final)
        if final:
            return figures
