"""A watchdog that guarantees no engine outlives tunelab, even after SIGKILL.

Started beside each engine as ``python -m tuner.engine.reaper --parent PID
--root PID``, in its own session so a terminal hang-up does not take it down
first. It keeps a list of the engine's process tree and, as soon as tunelab
(its parent) dies or the engine's root process ends, kills whatever of that
tree is left, then removes the engine's IPC directory (tuner.engine.ipc_dir)
when given one. PR_SET_PDEATHSIG alone would not do: it fires when the
*thread* that forked dies, and it does not reach grandchildren.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time

from tuner.engine import proctree
from tuner.engine.ipc_dir import remove_ipc_dir


def watch(parent: int, root: int, period: float = 0.2) -> int:
    """Blocks until the parent or the root is gone, then kills the rest of the tree."""
    root_ref = proctree.ref(root)
    if root_ref is None:
        return 0
    known = proctree.tree(root, root)
    last_scan = time.monotonic()
    while True:
        parent_gone = os.getppid() != parent
        root_gone = not root_ref.alive()
        if parent_gone or root_gone:
            break
        if time.monotonic() - last_scan >= 1.0:
            known |= proctree.tree(root, root)
            last_scan = time.monotonic()
        time.sleep(period)
    if parent_gone:
        known |= proctree.tree(root, root)
        # tunelab is gone: nobody will wait for a graceful shutdown.
        leftover = proctree.kill_tree(root, known=known, graceful=0.0, term=2.0)
    else:
        # The root ended (stopped or crashed): end any orphaned children.
        for member in proctree.alive(known):
            member.send(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, signal.SIGKILL)
        leftover = proctree.alive(known)
    return 1 if leftover else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--root", type=int, required=True)
    parser.add_argument("--ipc-dir", default=None, help="the engine's socket directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    status = watch(args.parent, args.root)
    if status == 0:  # the tree is gone: its sockets are unused
        remove_ipc_dir(args.ipc_dir)
    return status


if __name__ == "__main__":
    sys.exit(main())
