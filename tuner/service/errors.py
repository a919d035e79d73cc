"""The errors of the study service, in one module so paths, peer checks and the client share them.

Every one is a :class:`~tuner.errors.TunelabError` (a message and a fix, no
traceback); the TUI and the CLI catch :class:`ServiceError` around any use
of the service, so the refusals below reach the user the same way as "the
service does not answer".
"""

from __future__ import annotations

from tuner.errors import TunelabError


class ServiceError(TunelabError):
    """The service could not be reached, or refused a request."""


class UnsafeServiceDirError(ServiceError):
    """A directory of the service is not private to this user (owner, mode, a symlink)."""


class ForeignPeerError(ServiceError):
    """The other end of the service's socket is not a process of this user."""
