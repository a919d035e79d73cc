"""The TUI as a user runs it over SSH, with the engine double: the subject of the hang-up test.

Run: ``python -m tests.support.fault_tui --store DB`` inside a pseudo-terminal.
It is the real ``TunelabApp`` in a real terminal (no test pilot), with the
TUI tests' services: recorded vLLM introspection, no GPU, and the study
ENGINE DOUBLE in place of vLLM (its token gap comes from ``DOUBLE_TOKEN_MS``
in the environment, so the test can make a run last long enough to cut it).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True)
    args = parser.parse_args(argv)
    from tests.support.tui_harness import services
    from tui.app import TunelabApp

    svc = replace(services(), store_path=Path(args.store))
    TunelabApp(services=svc).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
