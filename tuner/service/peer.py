"""Who is at the other end of the service's Unix socket, as the kernel says.

The client sends its whole environment (tokens included) in the first request
and prints what the service answers, so before it sends a byte it asks the
kernel which user holds the other end of the connected socket (Linux
``SO_PEERCRED``; BSD/macOS ``LOCAL_PEERCRED``) and refuses anyone but itself.
The service asks the same of every connection it accepts and drops foreign
ones. Both are checks on the connected socket itself, so no race between a
check of a path and its use can fool them.
"""

from __future__ import annotations

import os
import pwd
import socket
import struct

from tuner.service.errors import ForeignPeerError

# struct ucred (Linux, <sys/socket.h>): pid_t pid; uid_t uid; gid_t gid.
_UCRED = struct.Struct("iII")
# struct xucred (BSD/macOS, <sys/ucred.h>): u_int cr_version; uid_t cr_uid; short
# cr_ngroups; gid_t cr_groups[16] (76 bytes); SOL_LOCAL is 0.
_XUCRED_HEAD = struct.Struct("II")
_XUCRED_SIZE = 76
_SOL_LOCAL = 0


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of the connected Unix socket ``sock``.

    Raises:
        ForeignPeerError: this platform cannot tell (then nothing is sent either).
        OSError: the socket is not connected.
    """
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        return int(_UCRED.unpack(raw)[1])
    if hasattr(socket, "LOCAL_PEERCRED"):  # pragma: no cover - BSD/macOS
        raw = sock.getsockopt(_SOL_LOCAL, socket.LOCAL_PEERCRED, _XUCRED_SIZE)
        return int(_XUCRED_HEAD.unpack_from(raw)[1])
    raise ForeignPeerError(  # pragma: no cover - neither Linux nor BSD
        "this platform cannot tell which user serves the tunelab service socket",
        fix="run detached jobs on Linux, or run the command in the foreground",
    )


def user_name(uid: int) -> str:
    """``name (uid N)`` for messages; the bare id when the user has no name."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def is_own(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` runs as this user (False when it cannot be told)."""
    try:
        return peer_uid(sock) == os.getuid()
    except (OSError, ForeignPeerError):
        return False


def check_server(sock: socket.socket, where: str) -> None:
    """Refuses a service socket held by another user, before anything is sent on it.

    Args:
        sock: The connected socket.
        where: The socket's path, for the message.

    Raises:
        ForeignPeerError: the service at ``where`` runs as another user.
    """
    uid = peer_uid(sock)
    if uid != os.getuid():
        raise ForeignPeerError(
            f"the tunelab service socket {where} is served by {user_name(uid)}, not by you "
            f"({user_name(os.getuid())}); nothing was sent to it (it would have received "
            "your environment, tokens included)",
            fix="remove that socket's directory, or set TUNELAB_HOME to a private directory "
            "of yours; tell your administrator if you did not expect another user there",
        )
