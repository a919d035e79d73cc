"""A lean HTTP/1.1 streaming transport for the benchmark's hot path.

aiohttp costs several Python calls per HTTP chunk and a task wake-up per
read; at one SSE event per chunk that overhead is most of a client's CPU.
This transport is an ``asyncio.Protocol`` that does everything for a
response inside ``data_received``; the HTTP framing (status line, headers,
chunked or sized bodies, keep-alive) is parsed by ``httptools`` — llhttp,
the parser uvicorn and Node.js use — so a chunk terminator split across reads
or any other framing edge case is the kept library's problem, not ours
(issue 19 "Then" 4: the hand-written parser aborted keep-alive connections
when ``0\\r\\n`` and the final ``\\r\\n`` came in different reads). Body bytes
of one read are handed to the sink in one call with one ``perf_counter``,
so the token path never touches a coroutine.

Every read is bounded (issue 19, "Unbounded reads"): the head at
MAX_HEAD_BYTES, a body at the caller's ``max_body`` and an error body is kept
only up to ERROR_BODY_BYTES, after which the connection is dropped. Time
bounds (stall, overall deadline) are the caller's: the transport reports
progress through ``touch`` only when the head is complete, never per byte,
so a 1-byte/s trickle cannot keep a request alive.

Whatever a server answers ends as a return value or an :class:`HttpError`
with a reason, never as an exception escaping into the event loop (issue
26: a ``101 Switching Protocols`` made httptools raise out of
``data_received`` and asyncio printed a traceback). Interim ``1xx`` answers
are skipped as RFC 9110 section 15.2 asks (their heads count towards the
head limit); ``101``, TLS or HTTP/2 bytes on an ``http://`` URL and answers
without a status line (HTTP/0.9, not HTTP at all) are named as such.
benchmarks/client_ceiling.py measures what the transport buys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter
from typing import Protocol
from urllib.parse import urlsplit

import httptools

from tuner.bench.tls import context_for
from tuner.errors import RunFailedError

# feed(payload_bytes, now) -> None; receives de-framed body bytes as they come.
BodySink = Callable[[bytes, float], None]

MAX_HEAD_BYTES = 32 * 1024  # status line + headers; vLLM sends ~150 bytes
ERROR_BODY_BYTES = 4096  # kept of a non-200 answer; the rest is not read
DEFAULT_MAX_BODY = 64 * 1024 * 1024


class HttpError(RunFailedError):
    """Transport-level failure; ``kind`` is the short class used in reports."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class StreamTransport(Protocol):
    """What BenchClient needs from a streaming transport (benchmarks/ plugs in aiohttp)."""

    async def post_stream(
        self,
        path: str,
        body: bytes,
        sink: BodySink,
        touch: Callable[[float], None],
        max_body: int = DEFAULT_MAX_BODY,
    ) -> tuple[int, bytes]:
        """POST ``body`` and stream the answer's body into ``sink``; (status, error body)."""
        ...

    def close(self) -> None:
        """Drop idle connections."""
        ...


_SWITCHING = (
    "the server answered 101 Switching Protocols: it switches to another protocol "
    "(WebSocket, HTTP/2), and an OpenAI-compatible server answers with 200 and an event stream"
)


def _looks_like_tls(first: bytes) -> bool:
    """A TLS record header: content type 20-23 (alert 21, handshake 22), version 3.x."""
    return len(first) >= 3 and 20 <= first[0] <= 23 and first[1] == 3


def _looks_like_http2(first: bytes) -> bool:
    """An HTTP/2 connection start: the preface, or a SETTINGS/GOAWAY frame on stream 0."""
    if first.startswith(b"PRI * HTTP/2"):
        return True
    return len(first) >= 9 and first[3] in (0x04, 0x07) and first[5:9] == b"\x00\x00\x00\x00"


def not_http_reason(first: bytes, status: int, complete: bool, detail: str) -> str:
    """Why bytes from the server are no HTTP/1.1 answer, in the user's terms.

    Args:
        first: The first bytes of the answer (up to 16).
        status: The status parsed so far (0 when no status line was read).
        complete: Whether an answer had already ended before the bad bytes.
        detail: httptools' own message.
    """
    if _looks_like_tls(first):
        return "the server answered with TLS: it serves HTTPS; use an https:// URL"
    if _looks_like_http2(first):
        return (
            "the server answered with HTTP/2 frames: it speaks HTTP/2 only, and tunelab "
            "streams over HTTP/1.1 (as vLLM's OpenAI-compatible server does)"
        )
    if status == 101:
        return _SWITCHING
    if complete:
        return (
            f"the server sent more bytes after its complete HTTP {status} answer "
            f"(a body on a 204 or 304 answer, or a wrong content-length): {detail}"
        )
    if not status and not first.startswith(b"HTTP/"):
        return (
            "the answer does not start with an HTTP status line (an HTTP/0.9 or non-HTTP "
            f"server): {first!r}"
        )
    return f"malformed HTTP from the server: {detail}"


class _Response:
    """One response: httptools callbacks collect, ``feed`` hands them on per read."""

    __slots__ = (
        "body",
        "chunked",
        "complete",
        "done",
        "error",
        "first",
        "framed",
        "head_bytes",
        "headers_done",
        "in_interim",
        "interim",
        "keep",
        "max_body",
        "parser",
        "pieces",
        "received",
        "sink",
        "status",
        "touch",
    )

    def __init__(self, sink: BodySink, touch: Callable[[float], None], max_body: int) -> None:
        self.sink = sink
        self.touch = touch
        self.max_body = max_body
        self.status = 0
        self.headers_done = False
        self.keep = False
        self.head_bytes = 0
        self.chunked = False
        self.framed = False  # content-length or chunked: EOF before the end is a break
        self.complete = False
        self.interim = 0  # 1xx answers skipped before the real one
        self.in_interim = False
        self.first = b""  # the answer's first bytes, to name what a non-HTTP server speaks
        self.received = 0
        self.pieces: list[bytes] = []
        self.body = bytearray()  # kept only for non-200 answers
        self.error: HttpError | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ---- httptools callbacks (no raising inside: llhttp would wrap it) ----
    def on_header(self, name: bytes, value: bytes) -> None:
        low = name.lower()
        if low == b"transfer-encoding" or low == b"content-length":
            self.framed = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            # An interim answer (100 Continue, 103 Early Hints): the real one follows.
            self.interim += 1
            self.in_interim = True
            self.framed = False
            return
        self.headers_done = True
        self.status = status
        self.keep = self.parser.should_keep_alive()  # llhttp resets it once the message ends

    def on_body(self, data: bytes) -> None:
        self.received += len(data)
        self.pieces.append(data)

    def on_message_complete(self) -> None:
        if self.in_interim:
            self.in_interim = False
            return
        self.complete = True

    # ---- per read ---------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Parse one read; raises HttpError on bad framing, another protocol or a bound crossed."""
        if not self.headers_done:
            if len(self.first) < 16:
                self.first += data[: 16 - len(self.first)]
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise HttpError("bad response", _SWITCHING) from None
        except httptools.HttpParserError as exc:
            why = not_http_reason(self.first, self.status, self.complete, str(exc))
            raise HttpError("bad response", why) from None
        if self.status == 101:  # llhttp stopped at the switch; nothing after it is HTTP
            raise HttpError("bad response", _SWITCHING)
        if not self.headers_done:
            if self.head_bytes > MAX_HEAD_BYTES:
                raise HttpError("bad response", f"response head over {MAX_HEAD_BYTES // 1024} KiB")
            return
        if self.head_bytes:
            self.head_bytes = 0
            self.touch(perf_counter())
        if self.pieces:
            pieces, self.pieces = self.pieces, []
            self._emit(pieces[0] if len(pieces) == 1 else b"".join(pieces), perf_counter())
        if self.status != 200 and len(self.body) >= ERROR_BODY_BYTES:
            self.complete = True  # enough of an error text; the connection is dropped
        elif self.received > self.max_body:
            raise HttpError("too large", f"response body over {self.max_body // 1024} KiB; cut off")
        if self.complete:
            self._finish()

    def _emit(self, data: bytes, now: float) -> None:
        if self.status == 200:
            self.sink(data, now)
        elif len(self.body) < ERROR_BODY_BYTES:
            self.body += data[: ERROR_BODY_BYTES - len(self.body)]

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def keep_alive(self) -> bool:
        """Whether the connection may carry the next request."""
        return self.complete and self.framed and len(self.body) < ERROR_BODY_BYTES and self.keep

    def lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if not self.headers_done and not self.head_bytes:
            self.done.set_exception(
                HttpError("disconnected", "connection closed before any answer")
            )
        elif not self.headers_done and self.interim and not self.in_interim:
            self.done.set_exception(
                HttpError(
                    "disconnected",
                    f"connection closed after {self.interim} interim 1xx answer(s) "
                    "and before the real one",
                )
            )
        elif self.headers_done and not self.framed and self.status != 101:
            self._finish()  # close-delimited body ended normally
        else:
            why = f": {exc}" if exc else ""
            self.done.set_exception(HttpError("disconnected", f"stream broke mid-response{why}"))


class _Conn(asyncio.Protocol):
    """One TCP connection; routes bytes to the response in progress."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.response: _Response | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        resp = self.response
        if resp is None or resp.done.done():
            self.abort()  # bytes nobody asked for: the connection cannot be trusted
            return
        try:
            resp.feed(data)
        except Exception as exc:
            # An HttpError is the server's fault and ends the request with its reason;
            # anything else is a bug of ours and is raised where the request is awaited
            # (a crash report), instead of asyncio's "data_received() call failed" traceback.
            if not resp.done.done():
                resp.done.set_exception(exc)
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None:
            self.response.lost(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


def split_base_url(base_url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of an http(s) base URL.

    Raises:
        ValueError: Not http(s), no host, or a port that is not 1..65535.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the URL must look like http://HOST:PORT")
    try:
        port = parts.port  # raises ValueError for "abc" or 99999
    except ValueError:
        raise ValueError("the URL's port must be a number from 1 to 65535") from None
    if port == 0:
        raise ValueError("the URL's port must be a number from 1 to 65535")
    port = port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


class StreamingHttp:
    """Keep-alive connection pool for POSTs to one server.

    Args:
        base_url: ``http://host:port`` or ``https://host:port`` (IPv6 in brackets).
        headers: Extra request headers (e.g. Authorization), sent with every POST.
    """

    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        scheme, self.host, self.port, self.prefix = split_base_url(base_url)
        self.ssl = context_for(scheme)
        self._idle: list[_Conn] = []
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = f"{shown}:{self.port}"
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl)
        except (OSError, UnicodeError) as exc:  # refused, TLS refused, a name IDNA cannot encode
            raise HttpError(
                "connect error", f"cannot connect to {self._host_header}: {exc}"
            ) from None
        return conn

    async def post_stream(
        self,
        path: str,
        body: bytes,
        sink: BodySink,
        touch: Callable[[float], None],
        max_body: int = DEFAULT_MAX_BODY,
    ) -> tuple[int, bytes]:
        """POST ``body`` and stream the answer's body bytes into ``sink``.

        Returns:
            (status, error body) — the error body only for non-200 answers.

        Raises:
            HttpError: connection refused, broken mid-response, or over a bound.
        """
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{self._extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        for attempt in (0, 1):
            conn: _Conn | None = None
            # The retry takes a fresh connection: every idle one may be as stale as the first.
            while attempt == 0 and self._idle and conn is None:
                idle = self._idle.pop()
                conn = None if idle.closed else idle
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            resp = _Response(sink, touch, max_body)
            conn.response = resp
            assert conn.transport is not None
            conn.transport.write(head + body)
            try:
                await resp.done
            except HttpError as exc:
                conn.response = None
                conn.abort()
                # A kept-alive connection the server had just closed: retry once, fresh.
                if reused and attempt == 0 and exc.kind == "disconnected" and not resp.status:
                    continue
                raise
            except BaseException:
                conn.response = None
                conn.abort()  # cancelled (timeout, stall, user): the stream is unusable
                raise
            conn.response = None
            if resp.keep_alive() and not conn.closed:
                self._idle.append(conn)
            else:
                conn.abort()
            return resp.status, bytes(resp.body)
        raise HttpError("disconnected", "connection closed before any answer")

    def close(self) -> None:
        """Close idle connections."""
        for conn in self._idle:
            conn.abort()
        self._idle.clear()
