"""A long command's result file: its destination checked before the run, its result kept after.

``tunelab ablate`` runs for hours and writes one file at the end (the
minimal preset). An ``--output`` that names a missing folder, an unwritable
one, a device or an existing file used to fail only then, with the result
lost. :func:`plan` checks the destination before the first trial (a folder
given as ``--output`` gets a file named for the result inside it), and
:func:`save` writes atomically (:func:`tuner.export.files.atomic_write`) and,
if the write still fails (the disk filled up, the folder went away), puts the
result in tunelab's data folder instead and says where, or, failing that,
hands it back to be printed: a result is never lost to a bad destination.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tuner import paths
from tuner.errors import TunelabError
from tuner.export.errors import ExportError
from tuner.export.files import atomic_write, describe_os_error


class ResultFileError(TunelabError):
    """The ``--output`` destination cannot take the result (bad input: exit 2)."""


def plan(output: Path, file_name: str, *, force: bool, flag: str = "--output") -> Path:
    """The file the result will go to, checked now: before the long run, not after it.

    Args:
        output: What the user gave: a file path, or an existing folder (then the
            file is ``output / file_name``).
        file_name: The result's own file name, used inside a folder.
        force: An existing file may be replaced.
        flag: The option's name, for messages.

    Raises:
        ResultFileError: the folder is missing or not writable, the path is a
            device, FIFO or folder, or the file exists and ``force`` is off.
    """
    path = output
    try:
        path = output / file_name if output.is_dir() else output
        mode: int | None = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new file (its folder is checked below)
        mode = None
    except OSError as exc:  # a name too long, a loop of links, no permission
        raise ResultFileError(
            f"{flag} {path}: {exc.strerror or exc}", fix="choose another path"
        ) from None
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise ResultFileError(f"{flag} {path} is a folder", fix="give a file path")
        if not stat.S_ISREG(mode):
            raise ResultFileError(
                f"{flag} {path} is not a regular file (a device, a FIFO or a socket)",
                fix="give the path of an ordinary file",
            )
        if not force:
            raise ResultFileError(
                f"{flag} {path} already exists", fix="pass --force to replace it, or another path"
            )
    _probe_folder(path.parent, flag)
    return path


def _probe_folder(folder: Path, flag: str) -> None:
    """Creates and removes a file in ``folder``: the one test that a write will work there."""
    if not folder.is_dir():
        raise ResultFileError(
            f"{flag}: the folder {folder} does not exist (or is not a folder)",
            fix=f"create it first (mkdir -p {folder}) or choose another path",
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=".tunelab-probe-", dir=folder)
    except OSError as exc:
        raise ResultFileError(
            f"{flag}: {describe_os_error(exc, folder)}", fix="choose a folder you can write to"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


@dataclass(frozen=True)
class Saved:
    """Where a result went.

    Attributes:
        path: The file written: the one asked for, a fallback, or None (nowhere:
            the caller prints the text).
        note: Empty when it went where asked; else what happened, for the user.
    """

    path: Path | None
    note: str = ""


def save(path: Path, text: str, *, force: bool, what: str = "result") -> Saved:
    """Writes ``text`` to ``path``; if that fails, to tunelab's data folder; else to nobody.

    Never raises for a failed write: the result of a long run outlives its destination.
    """
    try:
        return Saved(atomic_write(path, text, force=force))
    except ExportError as exc:
        failure = str(exc)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fallback: Path | None = None
    try:
        fallback = paths.data_dir() / "results" / f"{path.stem}-{stamp}{path.suffix or '.txt'}"
        fallback.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(fallback, text)
    except (ExportError, OSError) as exc:
        return Saved(
            None,
            f"{failure}; the {what} could not be saved to {fallback or 'the data folder'} "
            f"either ({exc}): it is printed below",
        )
    return Saved(fallback, f"{failure}; the {what} was saved to {fallback} instead")
