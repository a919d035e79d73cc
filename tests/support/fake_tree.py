"""A process tree shaped like vLLM's, made of plain sleeping Pythons (a test double).

The root forks a child that renames nothing but re-parents a grandchild and
one process that leaves the process group with setsid, so the tree logic is
tested against every way vLLM's children can hide. Prints all pids as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def main() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess,sys,time; p=subprocess.Popen("
            + repr(SLEEP)
            + "); print(p.pid, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    escaped = subprocess.Popen(SLEEP, start_new_session=True)
    print(
        json.dumps(
            {"root": os.getpid(), "pids": [os.getpid(), child.pid, grandchild, escaped.pid]}
        ),
        flush=True,
    )
    time.sleep(600)


if __name__ == "__main__":
    main()
