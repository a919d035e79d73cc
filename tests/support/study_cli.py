"""Runs the real ``tunelab`` CLI with the study engine double in place of vLLM.

``python -m tests.support.study_cli tune --param ... --model engine-double``
is ``tunelab tune ...`` exactly — same argument parsing, store, Optuna study,
progress and output — except that ``tuner.cli.study_session.make_runner`` builds
its trial runner with ``command_for`` pointing at
``tests/support/study_engine_double.py``. For tests whose subject is the
study machinery (several workers, kill and resume), not the engine.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.cli import study_session
from tuner.config import EngineConfig
from tuner.studies.executor import TrialRunner

DOUBLE = Path(__file__).with_name("study_engine_double.py")


def double_command(config: EngineConfig) -> list[str]:
    """The double's command line for a config: its engine args follow, like `vllm serve`'s."""
    return [
        sys.executable,
        str(DOUBLE),
        "--port",
        "{port}",
        "--host",
        "{host}",
        *config.engine_args(),
    ]


def _make_runner(store, on_event, startup_timeout):  # type: ignore[no-untyped-def]
    from tuner.rules import Target
    from tuner.trials.runner import RunContext

    # The double is no vLLM: judge configs against the catalogue (no introspection
    # subprocess, which would only add seconds per test home).
    context = RunContext(Target(note="study engine double: catalogue rules"), None, [])
    options = {"startup_timeout": startup_timeout, "context": context}
    return TrialRunner(store, on_event, options, command_for=double_command)


def main() -> None:
    study_session.make_runner = _make_runner
    from tui.cli import main as tunelab_main

    tunelab_main(sys.argv[1:])


if __name__ == "__main__":
    main()
