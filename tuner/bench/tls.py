"""The process's one TLS context for talking to servers.

Building a verifying context loads the whole CA bundle: 50 ms on an idle
core, 300 ms and more on a loaded 2-core box, and it holds the GIL and the
event loop for all of it. Every engine start and every benchmark used to make
a fresh one (httpx builds one per client), which stalled the TUI's event loop
in the middle of measurements. Plain-HTTP URLs (every engine tunelab starts)
never negotiate TLS and need no context at all; HTTPS servers share one,
built on first use. The trust store is the system's
(:func:`ssl.create_default_context`), the same one the streaming client uses.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def client_context() -> ssl.SSLContext:
    """The verifying client context, built once per process."""
    return ssl.create_default_context()


def verify_for(url: str) -> ssl.SSLContext | bool:
    """What to give httpx's ``verify=`` for a client of ``url``.

    Returns:
        The shared verifying context for ``https://`` URLs; ``False`` for plain
        HTTP, where no TLS is ever negotiated, so nothing is left unverified and
        no CA bundle is loaded.
    """
    return client_context() if url.lower().startswith("https://") else False


def context_for(scheme: str) -> ssl.SSLContext | None:
    """The context for a raw asyncio connection: the shared one for ``https``, else None."""
    return client_context() if scheme == "https" else None
