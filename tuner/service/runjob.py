"""The process that stands between the service and one job's ``tunelab`` command.

``python -m tuner.service.runjob --rc FILE -- tunelab ab ...`` runs the
command with the job's log as its output and, when it ends, writes its exit
status to FILE (atomically). The service may be restarted while a job runs;
it then learns how the job ended from that file, which a bare child process
could not tell a service that is not its parent. Stop signals are passed on:
SIGINT (the service's "stop") reaches the command as a Ctrl-C would, so it
stops its engines and records the interrupted trial as a foreground run does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def write_status(path: Path, returncode: int) -> None:
    """``{"returncode": N, "ended": epoch}`` written whole or not at all."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"returncode": returncode, "ended": time.time()}))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rc", type=Path, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    # The job's process group gets the service's SIGINT; this process waits for the
    # command to act on it. A no-op handler, not SIG_IGN: an ignored signal would be
    # inherited through exec and the command could not be stopped with Ctrl-C.
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.signal(signal.SIGHUP, lambda *_: None)
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"[tunelab] could not start the job: {exc}", flush=True)
        write_status(args.rc, 127)
        return 127
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
    write_status(args.rc, rc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
