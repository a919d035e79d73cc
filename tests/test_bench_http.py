"""The lean transport's framing (httptools) at every split point of recorded responses.

Issue 19 "Then" 4: the old hand-written chunked parser ended a message at
``0\\r\\n`` and raised ``int(b"", 16)`` when the final ``\\r\\n`` came in the
next read (1 of 24 split points). Here each recorded response — a chunked
SSE stream as vLLM writes it, a content-length JSON answer, error bodies,
a close-delimited body — is fed in two reads split at EVERY byte, and one
byte at a time; the body handed on, the status, the end of the message and
the keep-alive decision must be the same for every split.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.bad_servers import completion_event, usage_event
from tuner.bench.http import ERROR_BODY_BYTES, HttpError, _Conn, _Response


def _chunked(events: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


SSE_EVENTS = [completion_event(i, chat=False) for i in range(3)] + [
    usage_event(8, 3),
    b"data: [DONE]\n\n",
]
SSE_BODY = b"".join(SSE_EVENTS)
JSON_BODY = b'{"object":"list","data":[{"id":"m","root":null}]}'
ERR_BODY = b'{"error":{"message":"overloaded","code":503}}'

# name -> (wire bytes, status, body the sink / error body must get, keep-alive, complete at end)
RECORDED = {
    "chunked sse": (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + _chunked(SSE_EVENTS),
        200,
        SSE_BODY,
        True,
    ),
    "content-length json": (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(JSON_BODY), JSON_BODY),
        200,
        JSON_BODY,
        True,
    ),
    "error body sized": (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: %d\r\n\r\n%s"
        % (len(ERR_BODY), ERR_BODY),
        503,
        ERR_BODY,
        True,
    ),
    "error body chunked, connection close": (
        b"HTTP/1.1 500 Internal Server Error\r\nconnection: close\r\n"
        b"transfer-encoding: chunked\r\n\r\n" + _chunked([ERR_BODY[:10], ERR_BODY[10:]]),
        500,
        ERR_BODY,
        False,
    ),
}


class _Collect:
    def __init__(self) -> None:
        self.body = bytearray()
        self.touched = 0

    def sink(self, data: bytes, now: float) -> None:
        self.body += data

    def touch(self, now: float) -> None:
        self.touched += 1


def _feed(parts: list[bytes]) -> tuple[_Response, _Collect, _Conn]:
    got = _Collect()
    resp = _Response(got.sink, got.touch, 1 << 20)
    conn = _Conn()
    conn.response = resp
    for p in parts:
        if p:  # asyncio never delivers an empty read
            conn.data_received(p)
    return resp, got, conn


@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_every_split_point_gives_the_same_message(name: str) -> None:
    wire, status, body, keep = RECORDED[name]
    for cut in range(len(wire) + 1):
        resp, got, conn = _feed([wire[:cut], wire[cut:]])
        assert resp.done.done() and resp.done.exception() is None, (name, cut)
        assert resp.status == status, (name, cut)
        received = bytes(got.body) if status == 200 else bytes(resp.body)
        assert received == body, (name, cut)
        assert resp.keep_alive() is keep, (name, cut)
        assert not conn.closed, (name, cut)  # never aborted on a split
        assert got.touched == 1  # the head counts as progress once, bytes never do


@pytest.mark.parametrize("name", sorted(RECORDED))
async def test_one_byte_per_read(name: str) -> None:
    wire, status, body, keep = RECORDED[name]
    resp, got, _ = _feed([wire[i : i + 1] for i in range(len(wire))])
    assert resp.done.done() and resp.status == status
    assert (bytes(got.body) if status == 200 else bytes(resp.body)) == body
    assert resp.keep_alive() is keep


async def test_close_delimited_body_ends_at_eof_and_a_framed_one_breaks() -> None:
    wire = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nhello "
    for cut in range(len(wire) + 1):
        resp, got, conn = _feed([wire[:cut], wire[cut:], b"world"])
        conn.connection_lost(None)
        assert resp.done.exception() is None and bytes(got.body) == b"hello world"
        assert not resp.keep_alive()
    chunked = RECORDED["chunked sse"][0]
    resp, _, conn = _feed([chunked[:-7]])  # the last chunk and terminator never came
    conn.connection_lost(None)
    exc = resp.done.exception()
    assert isinstance(exc, HttpError) and exc.kind == "disconnected"


async def test_bounds_head_body_and_error_text() -> None:
    resp, _, conn = _feed([b"HTTP/1.1 200 OK\r\nx-pad: " + b"a" * 40_000])
    exc = resp.done.exception()
    assert isinstance(exc, HttpError) and "head over" in str(exc) and conn.closed
    got = _Collect()
    resp = _Response(got.sink, got.touch, 10_000)
    conn = _Conn()
    conn.response = resp
    conn.data_received(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    for _ in range(20):
        if resp.done.done():
            break
        conn.data_received(b"400\r\n" + b"x" * 1024 + b"\r\n")
    exc = resp.done.exception()
    assert isinstance(exc, HttpError) and exc.kind == "too large" and conn.closed
    big = b"e" * (ERROR_BODY_BYTES * 3)
    resp, _, conn = _feed(
        [b"HTTP/1.1 500 X\r\ncontent-length: %d\r\n\r\n" % len(big), big[:5000], big[5000:]]
    )
    assert resp.done.exception() is None and len(resp.body) == ERROR_BODY_BYTES
    assert not resp.keep_alive()  # the rest was not read: the connection is not reused


async def test_garbage_is_a_bad_response_not_a_traceback() -> None:
    resp, _, conn = _feed([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"])
    exc = resp.done.exception()
    assert isinstance(exc, HttpError) and exc.kind == "bad response" and conn.closed
    await asyncio.sleep(0)


async def test_the_retry_after_a_stale_kept_alive_connection_opens_a_fresh_one() -> None:
    """Two idle connections the server has closed (the client not yet told): one retry, fresh.

    CI stop 33: the retry took the next idle connection, as stale as the first,
    and a request that any server would have answered failed "disconnected".
    """
    from tuner.bench.http import StreamingHttp

    accepted = 0

    async def handle(reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        stale = accepted <= 2  # the two pooled connections: closed as soon as they are used
        await reader.readuntil(b"\r\n\r\n")
        if not stale:
            w.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(SSE_BODY), SSE_BODY))
            await w.drain()
        w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = StreamingHttp(f"http://127.0.0.1:{port}")
    try:
        client._idle = [await client._connect(), await client._connect()]
        got: list[bytes] = []
        status, _ = await client.post_stream(
            "/x", b"{}", lambda d, now: got.append(d), lambda n: None
        )
        assert status == 200 and b"".join(got) == SSE_BODY
        assert accepted == 3  # one stale connection tried, then a fresh one
    finally:
        client.close()
        server.close()
