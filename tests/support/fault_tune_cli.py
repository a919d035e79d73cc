"""``tunelab`` with an engine double that shuts down as slowly as vLLM does.

Like ``tests/support/study_cli.py`` (the real CLI, the double as its engine),
but the engine is ``tests/support/fault_engine.py`` with ``--stop-delay``
taken from ``FAULT_STOP_DELAY_S``: vLLM needs seconds for its graceful
shutdown after SIGINT, and that is the window in which a killed ``tunelab
tune`` has committed a trial's result to the trial store but not yet told
the study. Run: ``python -m tests.support.fault_tune_cli tune ...``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tests.support.fault_procs import fault_engine_command


def _command(config: Any) -> list[str]:
    delay = os.environ.get("FAULT_STOP_DELAY_S", "0")
    return [*fault_engine_command(), "--stop-delay", delay, *config.engine_args()]


def _make_runner(store: Any, on_event: Any, startup_timeout: float) -> Any:
    from tuner.rules import Target
    from tuner.studies.executor import TrialRunner
    from tuner.trials.context import RunContext

    context = RunContext(Target(note="fault engine double: catalogue rules"), None, [])
    options = {"startup_timeout": startup_timeout, "context": context, "engine_cwd": os.getcwd()}
    return TrialRunner(store, on_event, options, command_for=_command)


def main() -> None:
    from tuner.cli import study_session

    study_session.make_runner = _make_runner
    from tui.cli import main as tunelab_main

    tunelab_main(sys.argv[1:])


if __name__ == "__main__":
    main()
