"""Atomic file writes: a file is either complete or absent, never half-written.

Each file is written to a temporary sibling in the same directory, flushed
and fsynced, then moved into place with one rename (``os.replace``, or
``os.link`` when overwriting is not allowed, so an existing file can never be
clobbered even in a race). The directory is fsynced after the rename so the
new name survives a crash. Any failure (disk full, read-only file system, no
permission) removes the temporary file and raises :class:`ExportError` with a
message that says what happened and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from tuner.export.errors import ExportError

_HINTS = {
    errno.ENOSPC: "the disk is full; free some space or choose another --out directory",
    errno.EDQUOT: "the disk quota is exceeded; free some space or choose another --out directory",
    errno.EROFS: "the file system is read-only; choose another --out directory",
    errno.EACCES: "permission denied; choose a directory you can write to with --out",
    errno.EPERM: "operation not permitted; choose a directory you can write to with --out",
    errno.ENOENT: "the directory does not exist; create it or choose another --out directory",
    errno.ENOTDIR: "a part of the path is not a directory; check --out",
    errno.EISDIR: "a directory exists at that path; choose another name or --out directory",
}


def describe_os_error(exc: OSError, path: Path) -> str:
    """A sentence for a failed write: the file, the reason and what to do."""
    hint = _HINTS.get(exc.errno or 0, exc.strerror or str(exc))
    return f"could not write {path}: {hint} ({errno.errorcode.get(exc.errno or 0, 'error')})"


def atomic_write(path: Path, data: str | bytes, *, force: bool = False, mode: int = 0o644) -> Path:
    """Writes ``data`` to ``path`` atomically.

    Args:
        path: Destination file.
        data: Text (written as UTF-8) or bytes.
        force: Replace an existing file; without it an existing file is an error.
        mode: Permission bits of the new file (0o755 for scripts).

    Returns:
        ``path``.

    Raises:
        ExportError: the file exists (without ``force``), or the write failed;
            no partial or temporary file is left behind.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if not force and path.exists():
        raise ExportError(f"{path} already exists; pass --force to overwrite it")
    directory = path.parent
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        if force:
            os.replace(tmp_name, path)
        else:
            _link_no_clobber(tmp_name, path)
        tmp_name = None
        _fsync_dir(directory)
    except FileExistsError:
        raise ExportError(f"{path} already exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise ExportError(describe_os_error(exc, path)) from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
    return path


def _link_no_clobber(tmp_name: str, path: Path) -> None:
    """Moves the temp file to ``path`` only if ``path`` does not exist (atomically)."""
    try:
        os.link(tmp_name, path)
    except FileExistsError:
        raise
    except OSError as exc:
        # File systems without hard links: fall back to check-then-rename.
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if path.exists():
            raise FileExistsError(str(path)) from None
        os.replace(tmp_name, path)
        return
    with contextlib.suppress(OSError):
        os.unlink(tmp_name)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename is done
    finally:
        os.close(fd)
