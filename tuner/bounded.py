"""Input from outside read with limits: bytes actually read, and JSON nesting depth.

A file's reported size is no bound: ``/dev/zero``, a FIFO and most ``/proc``
files report 0 bytes and then never end, so a reader that trusts ``st_size``
grows until the kernel kills the process. Every file tunelab reads on a
user's say-so (a dataset, guard prompts, a job spec, a preset's workload)
goes through :func:`read_bytes`/:func:`read_text`, which open the path
without blocking, accept regular files only, and stop at a byte limit that is
counted while reading. JSON from a file or a peer goes through
:func:`loads`, which refuses nesting deeper than any tunelab document needs
before Python's parser can recurse into a ``RecursionError``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tuner.errors import TunelabError

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 64 * MIB
# tunelab's deepest document (a trial row: results -> histograms -> buckets) nests
# under 10 levels; 64 leaves room and stays far from Python's recursion limit.
MAX_JSON_DEPTH = 64
_CHUNK = 1 << 16


class InputTooLargeError(TunelabError, ValueError):
    """A file or a document is larger, or nests deeper, than tunelab accepts."""


class NotAFileError(TunelabError, ValueError):
    """The path is a device, a FIFO, a socket or a directory, not a regular file."""


def read_bytes(
    path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, what: str = "file"
) -> bytes:
    """The content of the regular file ``path``, at most ``max_bytes`` of it.

    Args:
        path: The file.
        max_bytes: Limit on the bytes read (counted, not taken from ``st_size``).
        what: What the file is, for messages ("dataset", "guard prompts file").

    Raises:
        FileNotFoundError, PermissionError, OSError: as ``open`` raises them.
        NotAFileError: the path is not a regular file (``/dev/zero``, a FIFO).
        InputTooLargeError: the file holds more than ``max_bytes``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotAFileError(
                f"the {what} {path} is not a regular file ({_kind(info.st_mode)})",
                fix=f"give the path of an ordinary file as the {what}",
            )
        if info.st_size > max_bytes:  # a reported size is no bound, but a big one refuses early
            raise _too_large(path, max_bytes, what)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = src.read(min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(path, max_bytes, what)
    return b"".join(chunks)


def _too_large(path: str | Path, max_bytes: int, what: str) -> InputTooLargeError:
    return InputTooLargeError(
        f"the {what} {path} is larger than {_size(max_bytes)}",
        fix=f"use a smaller {what} (tunelab reads at most {_size(max_bytes)})",
    )


def read_text(
    path: str | Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    what: str = "file",
    errors: str = "strict",
) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``errors`` as for ``bytes.decode``)."""
    return read_bytes(path, max_bytes=max_bytes, what=what).decode("utf-8", errors)


def json_depth_exceeds(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """True when ``text`` opens more than ``max_depth`` nested arrays/objects.

    A linear scan that skips string contents; it does not validate the JSON
    (the parser does that afterwards), it only keeps the parser from recursing.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False  # cannot nest deeper than it has brackets
    depth = 0
    in_string = False
    escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > max_depth:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, what: str = "JSON") -> Any:
    """``json.loads`` that refuses documents nested deeper than ``max_depth``.

    Raises:
        InputTooLargeError: nested too deeply (also a ``ValueError``).
        json.JSONDecodeError: not JSON (a ``ValueError``).
    """
    if json_depth_exceeds(text, max_depth):
        raise InputTooLargeError(
            f"the {what} nests arrays or objects more than {max_depth} levels deep",
            fix=f"no tunelab {what} nests that deep; check where it came from",
        )
    try:
        return json.loads(text)
    except RecursionError:  # a depth the scan did not see (it is exact; belt and braces)
        raise InputTooLargeError(
            f"the {what} nests too deeply to parse", fix="check where it came from"
        ) from None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n} bytes"
