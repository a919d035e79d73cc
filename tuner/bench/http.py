"""A lean HTTP/1.1 streaming transport for the benchmark's hot path.

aiohttp costs several Python calls per HTTP chunk and a task wake-up per
read; at one SSE event per chunk that overhead is most of a client's CPU.
This transport is an ``asyncio.Protocol`` that does everything for a
response inside ``data_received``: the status line and headers, chunked or
content-length framing, SSE event splitting, and one ``perf_counter`` per
read — the token path never touches a coroutine. It speaks just what an
OpenAI-compatible server needs (POST with a JSON body, keep-alive, chunked
or sized bodies, plain TCP or TLS) and keeps idle connections for reuse.
benchmarks/client_ceiling.py measures what it buys.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
from collections.abc import Callable
from time import perf_counter
from urllib.parse import urlsplit

# feed(payload_bytes, now) -> None; receives de-framed body bytes as they come.
BodySink = Callable[[bytes, float], None]


class HttpError(Exception):
    """Transport-level failure; ``kind`` is the short class used in reports."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Response:
    """Parses one response as bytes arrive; calls the sink with body bytes."""

    __slots__ = (
        "body",
        "chunked",
        "done",
        "head",
        "keep_alive",
        "need",
        "raw",
        "remaining",
        "sink",
        "status",
        "touch",
    )

    def __init__(self, sink: BodySink, touch: Callable[[float], None]) -> None:
        self.sink = sink
        self.touch = touch
        self.head = b""
        self.status = 0
        self.chunked = False
        self.remaining = -1  # content-length left, -1: until close
        self.keep_alive = True
        self.raw = b""  # undecoded chunked bytes
        self.need = 0  # bytes of the current chunk (+ CRLF) still to take
        self.body = bytearray()  # kept only for non-200 answers
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def feed(self, data: bytes) -> None:
        now = perf_counter()
        self.touch(now)
        if not self.status:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self._parse_head(self.head[:end])
            data = self.head[end + 4 :]
            self.head = b""
        if self.chunked:
            self._feed_chunked(data, now)
        else:
            if self.remaining >= 0:
                data = data[: self.remaining]
                self.remaining -= len(data)
            self._emit(data, now)
            if self.remaining == 0:
                self._finish()

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        try:
            self.status = int(parts[1])
        except (IndexError, ValueError):
            raise HttpError("bad response", f"not an HTTP status line: {lines[0][:80]!r}") from None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == b"transfer-encoding" and b"chunked" in value:
                self.chunked = True
            elif name == b"content-length":
                self.remaining = int(value)
            elif name == b"connection" and value == b"close":
                self.keep_alive = False
        if not self.chunked and self.remaining < 0:
            self.keep_alive = False  # body runs until the server closes

    def _feed_chunked(self, data: bytes, now: float) -> None:
        raw = self.raw + data if self.raw else data
        pos, n = 0, len(raw)
        out: list[bytes] = []
        while pos < n:
            if self.need == 0:
                eol = raw.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(raw[pos:eol].split(b";", 1)[0], 16)
                pos = eol + 2
                if size == 0:
                    self.raw = b""
                    if out:
                        self._emit(b"".join(out), now)
                    self._finish()
                    return
                self.need = size + 2
            take = min(self.need, n - pos)
            piece = raw[pos : pos + take]
            self.need -= take
            pos += take
            if self.need < 2:  # part of the trailing CRLF came with this piece
                piece = piece[: len(piece) - (2 - self.need)]
            out.append(piece)
        self.raw = raw[pos:]
        if out:
            self._emit(out[0] if len(out) == 1 else b"".join(out), now)

    def _emit(self, data: bytes, now: float) -> None:
        if not data:
            return
        if self.status == 200:
            self.sink(data, now)
        elif len(self.body) < 4096:
            self.body += data

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if not self.status and not self.head:
            self.done.set_exception(
                HttpError("disconnected", "connection closed before any answer")
            )
        elif not self.chunked and self.remaining < 0:
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
        if resp is None:
            return  # stray bytes after a response: ignored, connection dropped later
        try:
            resp.feed(data)
        except HttpError as exc:
            if not resp.done.done():
                resp.done.set_exception(exc)
            self.abort()
        except ValueError as exc:
            if not resp.done.done():
                resp.done.set_exception(HttpError("bad response", f"malformed framing: {exc}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None:
            self.response.lost(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class StreamingHttp:
    """Keep-alive connection pool for POSTs to one server.

    Args:
        base_url: ``http://host:port`` or ``https://host:port``.
    """

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"URL must look like http://host:port, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = _ssl.create_default_context() if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        self._idle: list[_Conn] = []
        self._host_header = f"{self.host}:{self.port}"

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl)
        except OSError as exc:
            raise HttpError(
                "connect error", f"cannot connect to {self._host_header}: {exc}"
            ) from None
        return conn

    async def post_stream(
        self, path: str, body: bytes, sink: BodySink, touch: Callable[[float], None]
    ) -> tuple[int, bytes]:
        """POST ``body`` and stream the answer's body bytes into ``sink``.

        Returns:
            (status, error body) — the error body only for non-200 answers.

        Raises:
            HttpError: connection refused or broken mid-response.
        """
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        for attempt in (0, 1):
            conn: _Conn | None = None
            while self._idle and conn is None:
                idle = self._idle.pop()
                conn = None if idle.closed else idle
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            resp = _Response(sink, touch)
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
            if resp.keep_alive and not conn.closed:
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
