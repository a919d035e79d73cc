"""The server's side of a run before and after it: its URL and credentials, a missing endpoint.

Kept apart from the runner (tuner.bench.runner): the URL is checked and its
userinfo moved into a header before anything is sent, so nothing tunelab
prints or stores carries a password; a run whose every request got 404/405
is told which endpoint the server serves instead.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from tuner.bench.client import BenchClient
from tuner.bench.errors import BenchError
from tuner.bench.http import split_base_url
from tuner.bench.run_limits import RunGuard
from tuner.redact import redact_url


def url_and_headers(url: str, headers: dict[str, str] | None) -> tuple[str, dict[str, str]]:
    """Validate the URL; move userinfo credentials into an Authorization header.

    The returned URL carries no credentials, so nothing tunelab prints or
    stores can leak them (issue 19 "Then" 7).

    Raises:
        BenchError: Not an http(s) URL, or a bad port.
    """
    try:
        split_base_url(url)
    except ValueError as exc:
        raise BenchError(
            f"the server URL {redact_url(url)!r} is unusable: {exc} "
            "(for example http://127.0.0.1:8000 or http://[::1]:8000)"
        ) from None
    parts = urlsplit(url)
    out = dict(headers or {})
    if parts.username is not None or parts.password is not None:
        user = unquote(parts.username or "")
        secret = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{secret}".encode()).decode()
        out.setdefault("Authorization", f"Basic {token}")
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
    elif parts.query or parts.fragment:
        url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return url, out


def refuse_missing_endpoint(client: BenchClient, guard: RunGuard) -> None:
    """Every request answered 404/405: the server lacks the endpoint; say which to use."""
    kinds: Mapping[str, int] = guard.kinds
    if (
        not kinds
        or guard.failed < guard.ended
        or any(k not in ("HTTP 404", "HTTP 405") for k in kinds)
    ):
        return
    other = "chat" if client.endpoint == "completions" else "completions"
    raise BenchError(
        f"{client.url} does not exist on this server (every request got "
        f"{next(iter(kinds))}); it may serve only the other API: rerun with "
        f"--endpoint {other}"
    )
