"""``tunelab jobs run-spec FILE``: the study a TUI handed to the service, run as the TUI would.

Hidden from the listing: users start detached work with ``tunelab jobs start``;
this is the other way in, for the TUI's ``a`` (tuner.lab.job_spec says why the
study travels as a file). It runs the spec's plan (:meth:`ABJobSpec.plan`, the
A/B :func:`tuner.lab.run.ab` runs in-process) inside the same
study session as ``tunelab ab`` (store, progress in the job's log, the job's
event file for the TUI) and keeps the report as the study's last A/B, which is
where any TUI reads the verdict from.
"""

from __future__ import annotations

from pathlib import Path

from tuner.cli.study_output import print_ab
from tuner.cli.study_session import Session, run_study
from tuner.guard.settings import GuardSettings
from tuner.lab import config as lab_config
from tuner.lab.job_spec import read_spec
from tuner.lab.study import Study


def run_spec(path: Path) -> None:
    """Runs the spec's A/B to its verdict; errors are the study commands' errors."""
    spec = read_spec(path)
    for arm in (spec.a, spec.b):  # a spec file is input: its configs meet the policy first
        lab_config.enforce_policy(arm)
    session = Session("ab", spec.store_path, spec.startup_timeout, False, GuardSettings())
    report = run_study(
        session,
        spec.plan(),
        keep=lambda store, report: Study(store, spec.study).remember_ab(report),
    )
    print_ab(report)
