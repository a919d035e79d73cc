"""Atomic file writes: a file is either complete or absent, never half-written;
several files (:func:`write_all`) all change or none does.

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
from collections.abc import Mapping
from pathlib import Path

from tuner.errors import EXIT_BAD_INPUT
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


class FileNameError(ExportError):
    """Export file names that could be another export's files (bad input: exit 2)."""

    exit_code = EXIT_BAD_INPUT


def check_base_name(base: str, suffixes: Mapping[str, str]) -> None:
    """Refuses a base name whose files another base name's files could be.

    Export writes ``BASE + suffix`` per format (``.sh``, ``.docker.sh``, ...).
    When one suffix ends with another (``.docker.sh`` with ``.sh``), a base
    ending in the difference (``prod.docker``) writes ``prod.docker.sh`` as its
    shell script, the very name of ``prod``'s docker script: one export would
    overwrite the other. Such names are refused, compared case-insensitively
    (macOS and Windows file systems are), so the names are collision-free by
    construction, whatever was exported before into the same folder.

    Args:
        base: The file base name (already made file-name safe).
        suffixes: Format name -> file suffix, every format export knows.

    Raises:
        FileNameError: naming both files and what to do.
    """
    for long_fmt, long in suffixes.items():
        for short_fmt, short in suffixes.items():
            if long_fmt == short_fmt or not long.lower().endswith(short.lower()):
                continue
            infix = long[: -len(short)]
            if base.lower().endswith(infix.lower()) and len(base) > len(infix):
                other = base[: -len(infix)]
                raise FileNameError(
                    f"the file name {base!r} ends in {infix!r}: its {short_fmt} file "
                    f"{base}{short} would be the {long_fmt} file of a preset named {other!r}, "
                    "and one export would overwrite the other",
                    fix=f"rename the preset, or pass --name with a name not ending in {infix!r}",
                )


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


def write_all(files: list[tuple[Path, str | bytes, int]], *, force: bool = False) -> list[Path]:
    """Writes several files as one change: all new, or (on any failure) all as before.

    Every file is first written and fsynced to a temporary sibling; only then
    are they moved into place one by one, each existing file first renamed
    aside. If any step fails, the files already moved are taken back out and
    the old ones restored, so ``export --force`` never leaves a mix of old and
    new files.

    Args:
        files: ``(path, data, mode)`` for each file.
        force: Replace existing files; without it an existing file is an error
            before anything is written.

    Raises:
        ExportError: a file exists (without ``force``) or a write failed;
            the previous state is restored and no temporary file is left.
    """
    if not force:
        for path, _data, _mode in files:
            if path.exists():
                raise ExportError(f"{path} already exists; pass --force to overwrite it")
    staged: list[tuple[Path, str]] = []
    moved: list[tuple[Path, str | None]] = []  # (target, backup of the old file or None)
    current = files[0][0] if files else Path()
    try:
        for path, data, mode in files:
            current = path
            staged.append((path, _stage(path, data, mode)))
        for path, tmp in staged:
            current = path
            backup: str | None = None
            if path.exists():
                backup = _aside(path)
            try:
                if force:
                    os.replace(tmp, path)
                else:
                    _link_no_clobber(tmp, path)
            except BaseException:
                if backup is not None:
                    os.replace(backup, path)
                raise
            moved.append((path, backup))
        for directory in {p.parent for p, _ in staged}:
            _fsync_dir(directory)
    except OSError as exc:
        _roll_back(moved)
        if isinstance(exc, FileExistsError):
            raise ExportError(f"{current} already exists; pass --force to overwrite it") from None
        raise ExportError(describe_os_error(exc, current) + "; no file was changed") from None
    finally:
        for _path, tmp in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    for _path, backup in moved:
        if backup is not None:
            with contextlib.suppress(OSError):
                os.unlink(backup)
    return [path for path, _data, _mode in files]


def _stage(path: Path, data: str | bytes, mode: int) -> str:
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, mode)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _aside(path: Path) -> str:
    """Renames ``path`` to a fresh hidden sibling and returns that name."""
    fd, backup = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent)
    os.close(fd)
    os.replace(path, backup)
    return backup


def _roll_back(moved: list[tuple[Path, str | None]]) -> None:
    for path, backup in reversed(moved):
        with contextlib.suppress(OSError):
            if backup is not None:
                os.replace(backup, path)
            else:
                os.unlink(path)
