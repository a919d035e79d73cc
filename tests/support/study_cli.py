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
from typing import TYPE_CHECKING

from tuner.cli import study_session
from tuner.config import EngineConfig
from tuner.studies.executor import TrialRunner

if TYPE_CHECKING:  # the subprocess entry (main) loads neither
    import pytest
    from typer.testing import CliRunner

DOUBLE = Path(__file__).with_name("study_engine_double.py")
# A small workload the double measures in about a second (the in-process CLI tests').
FAST = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
FAST += ["--num-prompts", "16", "--concurrency", "8", "--warmup", "0", "--no-guard"]


def in_process(monkeypatch: pytest.MonkeyPatch, **env: str) -> CliRunner:
    """The real CLI run in this process with the double's runner; ``env``: more variables
    (e.g. ``TUNELAB_FORCE_GPU_COUNT``, ``DOUBLE_TOKEN_MS``) for this test only."""
    from typer.testing import CliRunner

    monkeypatch.setattr(study_session, "make_runner", _make_runner)
    monkeypatch.setenv("COLUMNS", "200")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return CliRunner()


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
