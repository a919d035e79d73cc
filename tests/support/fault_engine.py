"""An engine double with vLLM's process shape: an API server plus an engine core and a worker.

vLLM's ``vllm serve`` is an API-server process that forks a long-lived
engine-core process (renamed ``VLLM::EngineCore``) and, on GPUs, worker
processes (``VLLM::Worker``). When a worker or the core is SIGKILLed, the
API server only notices seconds later. This double reproduces exactly that
shape, so the trial runner's crash watch is tested on the process tree it
must handle: two children whose kernel-visible names (``comm``, what psutil
reports) start with ``VLLM``, and a server that keeps answering after they
die. It is a double, not vLLM: the real CPU engine is killed the same way in
the ``engine``-marked test.

Run: ``python -m tests.support.fault_engine --port P [--host H] [--record FILE]
[--stop-delay S] [--max-num-seqs N]``; ``--record`` receives one JSON line with
the pids; ``--stop-delay`` makes SIGINT take S seconds to shut down, as
vLLM's graceful shutdown does on a real server.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_NAME = 15


def _rename(name: str) -> None:
    """Sets the kernel's process name (15 bytes at most), as vLLM's setproctitle does."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _child(name: str) -> int:
    _rename(name)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # like vLLM's core: the server shuts it down
    while True:
        time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", default=None)
    parser.add_argument("--record", default=None)
    parser.add_argument("--stop-delay", type=float, default=0.0)
    args, rest = parser.parse_known_args(argv)
    if args.child:
        return _child(args.child)
    if args.stop_delay:

        def slow_stop(signum: int, frame: object) -> None:
            print(f"fault engine: shutting down (takes {args.stop_delay} s)", flush=True)
            time.sleep(args.stop_delay)
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, slow_stop)
    children = [
        subprocess.Popen([sys.executable, "-m", "tests.support.fault_engine", "--child", name])
        for name in ("VLLM::EngineCore", "VLLM::Worker_0")
    ]
    time.sleep(0.2)  # let the children rename themselves before health answers
    if args.record:
        with open(args.record, "a", encoding="utf-8") as fh:
            line = {"server": os.getpid(), "core": children[0].pid, "worker": children[1].pid}
            fh.write(json.dumps(line) + "\n")
    print(f"fault engine: core pid {children[0].pid}, worker pid {children[1].pid}", flush=True)
    from tests.support.study_engine_double import main as serve

    try:
        return serve(rest)
    finally:
        for child in children:
            child.kill()


if __name__ == "__main__":
    sys.exit(main())
