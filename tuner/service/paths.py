"""Where the service's socket, lock, job table and job logs live, and that they are private.

The socket and lock go to the user's runtime directory (``$XDG_RUNTIME_DIR``,
private to the user and cleared at logout) when there is one, else beside the
data; ``TUNELAB_HOME`` moves everything (tests). A Unix socket path must stay
under 108 bytes, so a path that would be longer falls back to a short one in
the temporary directory, named by the user id.

Whoever can put a socket where a client looks for the service receives the
client's whole environment (``HF_TOKEN`` included) and writes to its
terminal. So the socket's directory, wherever it is, must be private: made
0700 by this user, and then checked with ``lstat`` (a real directory, not a
symlink, owned by this user, mode exactly 0700). One another user made first
— the temporary directory's name is predictable — is refused with a message,
never adopted. No directory above it may let another user rename it away
(each belongs to root or the user; one others may write to has the sticky
bit, as ``/tmp`` has). The job table's directory gets the same checks and is
tightened to 0700 (it holds job logs and, while a job waits, its environment).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

import platformdirs

from tuner import paths
from tuner.service.errors import UnsafeServiceDirError
from tuner.service.peer import user_name

_MAX_SOCKET_PATH = 100
_PRIVATE = 0o700
_FIX = "or set TUNELAB_HOME to a short directory of yours (e.g. ~/.tunelab)"


def runtime_dir() -> Path:
    """The directory of the socket and the lock: private to this user, or refused.

    Raises:
        UnsafeServiceDirError: the directory, or one above it, could let another
            user stand in for the service.
    """
    home = os.environ.get("TUNELAB_HOME")
    if home:
        path = Path(home) / "run"
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(platformdirs.user_runtime_dir(paths.APP))
    else:
        path = paths.data_dir() / "run"
    if len(str(path / "service.sock")) > _MAX_SOCKET_PATH:
        return _tmp_fallback(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return private_dir(path)


def _tmp_fallback(preferred: Path) -> Path:
    """``$TMPDIR/tunelab-UID-DIGEST``: a name anyone can predict, so it is checked, not trusted."""
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:10]
    return private_dir(Path(tempfile.gettempdir()) / f"tunelab-{os.getuid()}-{digest}")


def _check_ancestors(path: Path) -> None:
    """No directory above ``path`` lets another user rename ``path`` away and put theirs there.

    Each ancestor (as written and as resolved) must belong to root or this user,
    and one that others may write to must have the sticky bit, as ``/tmp`` has.
    A directory writable by this user's own primary group only is accepted (the
    usual user-private group).
    """
    absolute = Path(os.path.abspath(path))
    chain = set(absolute.parents) | set(Path(os.path.realpath(absolute)).parents)
    for folder in sorted(chain, key=lambda p: len(p.parts)):
        try:
            info = os.stat(folder)
        except OSError:
            continue  # not there yet: created below by this user
        why = _unsafe_ancestor(info)
        if why:
            raise UnsafeServiceDirError(
                f"the directory {folder}, above the tunelab service directory {path}, {why}, "
                "so another user could replace the service's directory",
                fix="set TUNELAB_HOME (or TMPDIR) to a directory only you and root can change "
                "(e.g. ~/.tunelab)",
            )


def _unsafe_ancestor(info: os.stat_result) -> str:
    """Why a directory above the service's would let another user swap it ('' when safe)."""
    if info.st_uid not in (0, os.getuid()):
        return f"belongs to {user_name(info.st_uid)}"
    if info.st_mode & stat.S_ISVTX:
        return ""
    if info.st_mode & stat.S_IWOTH:
        return "is writable by all users without the sticky bit"
    if info.st_mode & stat.S_IWGRP and info.st_gid != os.getgid():
        return f"is writable by group {info.st_gid} without the sticky bit"
    return ""


def private_dir(path: Path, *, tighten: bool = False) -> Path:
    """``path`` as a directory only this user can use: made 0700 if missing, else checked.

    Args:
        path: The directory (its parent must exist).
        tighten: Lower an existing own directory's mode to 0700 instead of refusing it
            (for directories older tunelab versions made with the default mode).

    Raises:
        UnsafeServiceDirError: a symlink, not a directory, another user's, (unless
            ``tighten``) open to group or others, or under a directory that would let
            another user swap it.
    """
    _check_ancestors(path)
    try:
        os.mkdir(path, _PRIVATE)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        raise UnsafeServiceDirError(
            f"cannot create the tunelab service directory {path} ({exc.strerror})",
            fix=f"make its parent writable for you, {_FIX}",
        ) from None
    info = os.lstat(path)
    _refuse_foreign(path, info)
    if stat.S_IMODE(info.st_mode) != _PRIVATE:
        if not (created or tighten):
            raise UnsafeServiceDirError(
                f"the tunelab service directory {path} has mode "
                f"{stat.S_IMODE(info.st_mode):04o}; it must be 0700 (only you), or another "
                "user could reach or replace the service socket",
                fix=f"run `chmod 700 {path}` if you made it, else remove it; {_FIX}",
            )
        _chmod_private(path, info)
    return path


def _refuse_foreign(path: Path, info: os.stat_result) -> None:
    """Refuses a symlink, a non-directory and another user's directory, each with its fix."""
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeServiceDirError(
            f"the tunelab service directory {path} is a symbolic link (to "
            f"{os.readlink(path)}); tunelab uses only a real directory there",
            fix=f"remove the link (`rm {path}`), {_FIX}",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeServiceDirError(
            f"the tunelab service directory {path} is not a directory",
            fix=f"remove it, {_FIX}",
        )
    if info.st_uid != os.getuid():
        raise UnsafeServiceDirError(
            f"the tunelab service directory {path} belongs to {user_name(info.st_uid)}, not "
            f"to you ({user_name(os.getuid())}); a service there would receive your "
            "environment, tokens included",
            fix=f"have it removed (it is not yours), {_FIX}",
        )


def _chmod_private(path: Path, seen: os.stat_result) -> None:
    """Sets 0700 on the directory ``seen`` described, through a descriptor (never a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            raise UnsafeServiceDirError(
                f"the tunelab service directory {path} was replaced while tunelab checked it",
                fix=f"remove it and try again, {_FIX}",
            )
        os.fchmod(fd, _PRIVATE)
    finally:
        os.close(fd)


def socket_path() -> Path:
    return runtime_dir() / "service.sock"


def lock_path() -> Path:
    return runtime_dir() / "service.lock"


def jobs_dir() -> Path:
    """The job table (jobs.json) and one log file per job; kept across restarts, 0700."""
    return private_dir(paths.data_dir() / "jobs", tighten=True)


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of a file of the service's own (mode 0600 when created), never via a symlink.

    Args:
        path: A file inside one of the private directories above.
        flags: ``os.O_*`` access flags; ``O_CREAT``, ``O_NOFOLLOW`` and ``O_CLOEXEC`` are added.
    """
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
