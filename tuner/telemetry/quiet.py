"""Silence a noisy import at the file-descriptor level.

``import amdsmi`` without ``libamd_smi.so`` prints two lines with ``print``
before raising ``KeyError``; a native library may also write straight to
fd 1/2 from C. Either would land on the user's terminal or tear a Textual
screen, so the import runs with fds 1 and 2 pointed at /dev/null and
``sys.stdout``/``sys.stderr`` pointed at a buffer. What was printed is
returned, because it often holds the best explanation of the failure.

The redirection is process-wide for its (short) duration: call it before a
full-screen UI starts drawing, not from a worker thread while it draws.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def silenced() -> Iterator[io.StringIO]:
    """Run the block with stdout/stderr discarded at Python and OS level.

    Yields:
        A buffer holding whatever Python code printed inside the block
        (output written by C code to the fds is discarded, not captured).
    """
    captured = io.StringIO()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved: list[tuple[int, int]] = []
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
            except OSError:  # fd closed (daemonised process): nothing to protect
                continue
            os.dup2(devnull, fd)
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            yield captured
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)
