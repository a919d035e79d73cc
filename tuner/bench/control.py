"""Control calls to a server (/v1/models, /tokenize, /metrics), bounded in size and time.

One HTTP library for every non-streaming call tunelab makes (issue 19 "Then"
4: aiohttp and httpx were both used): httpx, which the engine's /health poll
(tuner/engine/server.py) uses too. Every answer is read through
``read_bounded``: at most ``max_bytes`` of body (a 1.5 GB /metrics page
raised MemoryError before) and at most ``timeout_s`` for the whole exchange —
httpx's own timeouts are per read, so a 1-byte/s trickle would never trip
them; an ``asyncio.timeout`` around the exchange does. httpx's parser (h11)
already refuses a head over 64 KiB (h11's max_incomplete_event_size).
JSON answers are parsed with :func:`tuner.bounded.loads`, so a deeply nested
document is a ControlError, not a ``RecursionError`` (issue 26), and
whatever the server answers — 101, a TLS or HTTP/2 reply, no status line —
ends as a ControlError with a one-line reason, never another exception.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.bench.tls import verify_for
from tuner.bounded import InputTooLargeError, loads
from tuner.errors import RunFailedError

METRICS_MAX_BYTES = 8 * 1024 * 1024  # vLLM's page is ~100 KiB even with many LoRAs
JSON_MAX_BYTES = 4 * 1024 * 1024


class ControlError(RunFailedError):
    """A control call failed; the message is one line, fit for the user."""


@dataclass(frozen=True)
class ControlAnswer:
    """A bounded answer: status and the body bytes."""

    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON; ControlError when it is empty or not JSON."""
        if not self.body.strip():
            raise ControlError("answered with an empty body")
        try:
            return loads(self.body, what="answer")
        except InputTooLargeError:
            raise ControlError("answered with JSON nested too deeply to read") from None
        except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError)
            raise ControlError(f"answered with non-JSON text: {self.body[:80]!r}") from None


def _failure(exc: Exception) -> str:
    """One line for a failed exchange; names a server that does not speak HTTP/1.1."""
    text = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    if "SWITCH_UPGRADE" in str(exc):  # h11's words for a 101 nobody asked for
        return "answered 101 Switching Protocols (another protocol, not an HTTP answer)"
    if isinstance(exc, httpx.RemoteProtocolError) and "disconnected" not in str(exc):
        text += (
            " (the answer is not HTTP/1.1: an HTTPS server needs an https:// URL, and an "
            "HTTP/2-only server cannot be benchmarked)"
        )
    return text


class ControlClient:
    """A small httpx client bound to one server's base URL.

    Args:
        base_url: ``http://host:port`` (no credentials; those go in ``headers``).
        headers: Extra headers for every call (e.g. Authorization).
        read_timeout_s: httpx's per-read limit: a call whose answer comes only when
            the server's work is done (``/stop_profile`` writing a trace) needs more.
    """

    def __init__(
        self, base_url: str, headers: dict[str, str] | None = None, read_timeout_s: float = 10.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(read_timeout_s, connect=5.0),
            trust_env=False,
            headers=headers or {},
            limits=httpx.Limits(max_connections=2, max_keepalive_connections=2),
            verify=verify_for(self.base_url),
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        payload: dict[str, Any] | None = None,
        timeout_s: float = 10.0,
        max_bytes: int = JSON_MAX_BYTES,
    ) -> ControlAnswer:
        """One call; the body is cut at ``max_bytes``, the whole exchange at ``timeout_s``.

        Raises:
            ControlError: unreachable, too slow, too large or broken.
        """
        url = self.base_url + path
        try:
            async with asyncio.timeout(timeout_s):
                return await self._read(method, url, payload, max_bytes)
        except TimeoutError:
            raise ControlError(f"gave no full answer within {timeout_s:g} s") from None
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, UnicodeError) as exc:
            # StreamError: httpx refusing to read a body it cannot (e.g. after a 101);
            # OSError/UnicodeError: a socket or name error that escaped httpx's own mapping.
            raise ControlError(_failure(exc)) from None

    async def _read(
        self, method: str, url: str, payload: dict[str, Any] | None, max_bytes: int
    ) -> ControlAnswer:
        async with self._client.stream(method, url, json=payload) as resp:
            if resp.status_code == 101:
                raise ControlError(
                    "answered 101 Switching Protocols (another protocol, not an HTTP answer)"
                )
            buf = bytearray()
            async for part in resp.aiter_bytes():
                buf += part
                if len(buf) > max_bytes:
                    raise ControlError(f"answer is over {max_bytes // 1024} KiB; not read")
            return ControlAnswer(resp.status_code, bytes(buf))

    async def get_json(self, path: str, timeout_s: float = 10.0) -> Any:
        """GET a JSON document (non-200, empty or non-JSON: ControlError)."""
        ans = await self.request("GET", path, timeout_s=timeout_s)
        if ans.status != 200:
            raise ControlError(f"answered HTTP {ans.status}")
        return ans.json()

    async def post_json(self, path: str, payload: dict[str, Any], timeout_s: float = 30.0) -> Any:
        """POST JSON and return the JSON answer (non-200, empty, non-JSON: ControlError)."""
        ans = await self.request("POST", path, payload=payload, timeout_s=timeout_s)
        if ans.status != 200:
            raise ControlError(f"answered HTTP {ans.status}")
        return ans.json()

    async def get_text(self, path: str, timeout_s: float = 5.0) -> str | None:
        """GET a text page (e.g. /metrics), or None when there is none or it is unusable.

        Invalid UTF-8 is replaced, not raised on: a page that turns bad mid-run
        yields its readable lines.
        """
        try:
            ans = await self.request("GET", path, timeout_s=timeout_s, max_bytes=METRICS_MAX_BYTES)
        except ControlError:
            return None
        if ans.status != 200:
            return None
        return ans.body.decode("utf-8", "replace")
