"""The TUI as a user runs it over SSH, with the engine double: the subject of the hang-up test.

Run: ``python -m tests.support.fault_tui --store DB`` inside a pseudo-terminal.
It is the real ``TunelabApp`` in a real terminal (no test pilot), with the
TUI tests' services: recorded vLLM introspection, no GPU, and the study
ENGINE DOUBLE in place of vLLM (its token gap comes from ``DOUBLE_TOKEN_MS``
in the environment, so the test can make a run last long enough to cut it).
With ``--detach`` no engine command is injected, so the A/B goes to the study
service as in production (the job's engine is the double when
``TUNELAB_JOB_ENTRY`` says so).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True)
    parser.add_argument(
        "--detach",
        action="store_true",
        help="no in-process engine: the A/B goes to the study service, whose job runs the "
        "engine TUNELAB_JOB_ENTRY names (the double) or real vLLM",
    )
    args = parser.parse_args(argv)
    from tests.support.tui_harness import services
    from tui.app import TunelabApp

    svc = replace(services(double=not args.detach), store_path=Path(args.store))
    TunelabApp(services=svc).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
