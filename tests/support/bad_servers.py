"""Misbehaving OpenAI-compatible servers on loopback, for the bench's hostile-server suite.

A fake *server* at the HTTP boundary (named as one). ``BadServer(faults)``
runs a tiny HTTP/1.1 server on 127.0.0.1 in its own thread and event loop
(so async tests and CLI tests both use it) that behaves like a correct vLLM
server except where ``faults`` say otherwise (issue 19's hostile-server
sweep): /v1/models shapes, /tokenize answers, chat-only, no usage, no or
broken /metrics, HTTP 500s, never-ending or trickling streams, endless
headers or events, bytes split at every boundary, lying usage counts and
markup in server text; and issue 26's: odd status lines and non-HTTP answers
(``reply=``, see ODD_REPLIES), whole servers that speak TLS or HTTP/2 or just
hang up (``protocol=``), chunk floods, keep-alive trickles, deeply nested
JSON, absurd usage numbers and servers failing every request. Every loop here
is bounded (by a byte or time cap), so a client bug shows up as a failed
assertion, never a hung test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

MODEL = "bad-model"
WRITE_CAP_BYTES = 64 * 1024 * 1024  # no endless writer sends more than this
WRITE_CAP_S = 30.0  # nor for longer than this
DEEP = 100_000  # nesting of the deeply nested JSON answers (far beyond Python's recursion limit)

# A TLS alert record (what a TLS server may send a client that spoke plain HTTP to it).
TLS_ALERT = b"\x15\x03\x03\x00\x02\x02\x46"
# An HTTP/2-only server's answer to an HTTP/1.1 request: SETTINGS, then GOAWAY(PROTOCOL_ERROR).
H2_FRAMES = (
    b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64"
    b"\x00\x00\x08\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
)
_SSE_BODY = b'data: {"choices":[{"index":0,"text":" t0"}]}\n\ndata: [DONE]\n\n'
_JSON_BODY = b'{"choices":[{"index":0,"text":" t0"}],"usage":null}'  # stream: true ignored

# Raw answers to a streaming request (the connection is closed after each): status
# lines and bodies no OpenAI-compatible server sends.
ODD_REPLIES: dict[str, bytes] = {
    "switching_101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\n\r\n\x81\x05hello",
    "switching_101_bare": b"HTTP/1.1 101 Switching Protocols\r\n\r\n" + _SSE_BODY,
    "continue_100_only": b"HTTP/1.1 100 Continue\r\n\r\n",
    "early_hints_103_only": b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n",
    "endless_100": b"HTTP/1.1 100 Continue\r\n\r\n" * 4000,
    "no_content_204_with_body": b"HTTP/1.1 204 No Content\r\ncontent-length: "
    + str(len(_SSE_BODY)).encode()
    + b"\r\n\r\n"
    + _SSE_BODY,
    "not_modified_304_with_body": b"HTTP/1.1 304 Not Modified\r\n\r\n" + _SSE_BODY,
    "no_status_line": b"content-type: text/event-stream\r\n\r\n" + _SSE_BODY,
    "http09": _SSE_BODY,
    "status_999": b"HTTP/1.1 999 Odd\r\ncontent-length: 2\r\n\r\nno",
    "status_text": b"HTTP/1.1 abc OK\r\ncontent-length: 0\r\n\r\n",
    "http_3_0": b"HTTP/3.0 200 OK\r\n\r\n" + _SSE_BODY,
    "binary": b"\x00\xff\xfe\x01garbage\r\n\r\n",
    "json_not_stream": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_JSON_BODY), _JSON_BODY),
    "tls_alert": TLS_ALERT,
    "http2_frames": H2_FRAMES,
    "bare_close": b"",
}

# Whole-connection behaviours (every path): bytes sent at once, then the connection closed.
PROTOCOLS: dict[str, bytes] = {"tls": TLS_ALERT, "h2": H2_FRAMES, "close": b""}


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def completion_event(i: int, chat: bool, role: bool = False) -> bytes:
    """One vLLM-format SSE token event (compact JSON, ``"usage":null``)."""
    if chat:
        delta = {"role": "assistant", "content": ""} if role else {"content": f" t{i}"}
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            "usage": None,
        }
    else:
        body = {
            "id": "cmpl-1",
            "object": "text_completion",
            "model": MODEL,
            "choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}],
            "usage": None,
        }
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def usage_event(prompt: Any, completion: Any) -> bytes:
    """The final usage event; either count may be any JSON value (absurd ones included)."""
    both_int = isinstance(prompt, int) and isinstance(completion, int)
    body = {
        "id": "cmpl-1",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion if both_int else None,
        },
    }
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def text_event(text: str, chat: bool) -> bytes:
    """A token event carrying ``text`` (empty and whitespace-only included)."""
    if chat:
        choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    else:
        choice = {"index": 0, "text": text, "finish_reason": None}
    body = {"id": "x-1", "choices": [choice], "usage": None}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def deep_json(depth: int = DEEP) -> bytes:
    """A JSON array nested ``depth`` levels (valid JSON; json.loads recurses on it)."""
    return b"[" * depth + b"]" * depth


def flood(kind: str, chat: bool, n: int) -> list[bytes]:
    """``n`` events that are no tokens (or the same token again), for the chunk-flood faults."""
    one = {
        "flood_empty": text_event("", chat),
        "flood_blank": text_event(" ", chat),
        "flood_newline": text_event("\n", chat),
        "flood_comments": b": keep-alive\n\n",
        "flood_role": completion_event(0, True, role=True),
        "flood_null": b'data: {"choices":[{"index":0,"delta":{"content":null}}]}\n\n',
        "flood_no_text": b'data: {"choices":[{"index":0,"finish_reason":null}]}\n\n',
    }[kind]
    return [one] * n


class BadServer:
    """A server misbehaving as ``faults`` says (see ``_route`` for the keys).

    Args:
        faults: e.g. {"tokenize": "empty", "metrics": "huge", "stream": "never_ends"}.
        itl_s: Gap between token events.
        host: Loopback address to listen on ("::1" for the IPv6 case).
    """

    def __init__(
        self, faults: dict[str, Any] | None = None, itl_s: float = 0.002, host: str = "127.0.0.1"
    ) -> None:
        self.host = host
        self.faults = dict(faults or {})
        self.itl_s = itl_s
        self.requests: list[str] = []
        self.auth: list[str] = []  # Authorization headers received, in order
        self.streams = 0
        self.metrics_calls = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    def __enter__(self) -> BadServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(asyncio.start_server(self._handle, self.host, 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("bad server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    # ---- plumbing ---------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        sock = w.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        protocol = self.faults.get("protocol")
        if protocol is not None:
            with contextlib.suppress(Exception):
                await reader.read(65536)  # whatever the client said, it is not our protocol
                w.write(PROTOCOLS[protocol])
                await w.drain()
            w.close()
            return
        try:
            for _ in range(10_000):  # keep-alive requests on one connection, bounded
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                n = 0
                for ln in lines[1:]:
                    if ln.lower().startswith("content-length:"):
                        n = int(ln.split(":", 1)[1])
                    elif ln.lower().startswith("authorization:"):
                        self.auth.append(ln.split(":", 1)[1].strip())
                body = await reader.readexactly(n) if n else b""
                self.requests.append(f"{method} {path}")
                if not await self._route(method, path, body, w):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            with contextlib.suppress(Exception):
                w.close()

    @staticmethod
    async def _send(
        w: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "application/json"
    ) -> bool:
        w.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\n"
            f"content-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await w.drain()
        return True

    async def _endless(self, w: asyncio.StreamWriter, piece: bytes, gap_s: float = 0.0) -> bool:
        """Write ``piece`` again and again until the client leaves or a cap is hit."""
        loop = asyncio.get_running_loop()
        end = loop.time() + WRITE_CAP_S
        sent = 0
        while sent < WRITE_CAP_BYTES and loop.time() < end:
            if w.is_closing():
                return False
            w.write(piece)
            sent += len(piece)
            await w.drain()
            await asyncio.sleep(gap_s)
        return False

    # ---- routes -----------------------------------------------------------
    async def _route(self, method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> bool:
        f = self.faults
        if f.get("control_reply") is not None and path in ("/v1/models", "/tokenize", "/metrics"):
            w.write(ODD_REPLIES[f["control_reply"]])  # odd answers to the control calls
            await w.drain()
            return False
        if path == "/v1/models":
            return await self._models(w)
        if path == "/tokenize":
            return await self._tokenize(w)
        if path == "/metrics":
            return await self._metrics(w)
        if path in ("/v1/completions", "/v1/chat/completions"):
            chat = path.endswith("chat/completions")
            if f.get("chat_only") and not chat:
                return await self._send(w, 404, b'{"detail":"Not Found"}')
            return await self._stream(json.loads(body), chat, w)
        return await self._send(w, 404, b'{"detail":"Not Found"}')

    async def _models(self, w: asyncio.StreamWriter) -> bool:
        kind = self.faults.get("models")
        entry: dict[str, Any] = {"id": self.faults.get("model_id", MODEL), "root": None}
        answers: dict[Any, bytes] = {
            None: json.dumps({"object": "list", "data": [entry]}).encode(),
            "list": json.dumps([entry]).encode(),
            "dict_data": json.dumps({"data": {"id": MODEL}}).encode(),
            "root_not_str": json.dumps({"data": [{"id": MODEL, "root": 42}]}).encode(),
            "non_json": b"<html>hi</html>",
            "empty": b"",
            "deep": b'{"object":"list","data":' + deep_json() + b"}",
        }
        return await self._send(w, 200, answers[kind])

    async def _tokenize(self, w: asyncio.StreamWriter) -> bool:
        kind = self.faults.get("tokenize")
        answers: dict[Any, tuple[int, bytes]] = {
            None: (200, json.dumps({"tokens": list(range(100, 200)), "count": 100}).encode()),
            "missing": (404, b'{"detail":"Not Found"}'),
            "empty": (200, b""),
            "non_json": (200, b"tokens: 1 2 3"),
            "list": (200, b"[1, 2, 3]"),
            "null": (200, b"null"),
            "nested": (200, b'{"tokens": [[1, 2], [3]]}'),
            "deep": (200, b'{"tokens":' + deep_json() + b"}"),
        }
        status, data = answers[kind]
        return await self._send(w, status, data)

    async def _metrics(self, w: asyncio.StreamWriter) -> bool:
        kind = self.faults.get("metrics")
        self.metrics_calls += 1
        if kind == "missing":
            return await self._send(w, 404, b"not found", "text/plain")
        if kind == "huge":
            w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n")  # until close
            return await self._endless(w, b"# padding " + b"x" * 65_000 + b"\n")
        lab = f'{{engine="0",model_name="{MODEL}"}}'
        text = (
            f"vllm:num_requests_running{lab} {float(self.streams)}\n"
            f"vllm:num_requests_waiting{lab} 0.0\n"
            f"vllm:kv_cache_usage_perc{lab} 0.25\n"
        ).encode()
        if kind == "bad_utf8" or (kind == "bad_utf8_later" and self.metrics_calls > 1):
            text = b"\xff\xfe\x80 garbage \xc3\x28\n" + text
        return await self._send(w, 200, text, "text/plain")

    async def _stream(self, req: dict[str, Any], chat: bool, w: asyncio.StreamWriter) -> bool:
        f = self.faults
        seq = self.streams
        self.streams += 1
        n_out = int(req.get("max_completion_tokens" if chat else "max_tokens") or 4)
        every = f.get("http_500_every")
        if every and seq % every == 1:
            return await self._send(w, 500, b'{"error":{"message":"[bold]boom[/] \x1b[31m"}}')
        succeed_every = f.get("succeed_every")  # only every n-th request succeeds
        if f.get("fail_all") or (succeed_every and seq % succeed_every):
            await asyncio.sleep(f.get("fail_delay_s", 0.0))
            status = int(f.get("fail_all") or 503)
            return await self._send(w, status, b'{"error":{"message":"overloaded"}}')
        if f.get("error_body") == "deep":
            return await self._send(w, 500, b'{"error":' + deep_json(3000) + b"}")
        if f.get("reply") is not None:
            w.write(ODD_REPLIES[f["reply"]])
            await w.drain()
            return False  # and the connection is closed
        kind = f.get("stream")
        if kind == "endless_headers":
            w.write(b"HTTP/1.1 200 OK\r\nx-pad: ")
            return await self._endless(w, b"a" * 1024)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        head += b"transfer-encoding: chunked\r\n\r\n"
        if f.get("interim"):  # interim answers first, as RFC 9110 allows any server to send
            head = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n" + head
        events = self._events(kind, chat, n_out)
        if kind == "never_ends":
            w.write(head)
            return await self._endless(w, _chunk(completion_event(1, chat)))
        if kind == "endless_event":
            w.write(head + _chunk(b'data: {"choices":[{"text":"'))
            return await self._endless(w, _chunk(b"x" * 8192))
        if kind == "trickle":
            w.write(head)
            return await self._endless(w, _chunk(b"d"), gap_s=0.05)
        if kind == "endless_comments":  # large complete events, none a token, at full speed
            w.write(head)
            return await self._endless(w, _chunk(b": " + b"p" * 8192 + b"\n\n"))
        if kind == "comment_trickle":  # complete SSE events, none of them a token, forever
            w.write(head)
            return await self._endless(w, _chunk(b": keep-alive\n\n"), gap_s=0.05)
        if kind == "error_event" and seq % 2 == 1:
            events = [*events[:2], b'data: {"error":{"message":"engine died [/]"}}\n\n']
        wire = head + b"".join(_chunk(e) for e in events) + b"0\r\n\r\n"
        if kind == "every_byte":
            for i in range(len(wire)):  # one byte per write: every split point on the wire
                w.write(wire[i : i + 1])
                await w.drain()
                await asyncio.sleep(0)
            return True
        if kind is not None and kind.startswith("flood"):  # many events: one write
            w.write(wire)
            await w.drain()
            return True
        w.write(head)
        for e in events[:-1]:
            await asyncio.sleep(self.itl_s)
            w.write(_chunk(e))
            await w.drain()
        w.write(_chunk(events[-1]) + b"0\r\n\r\n")
        await w.drain()
        return True

    def _events(self, kind: str | None, chat: bool, n_out: int) -> list[bytes]:
        """The SSE events of one answer: role chunk, tokens (and floods), usage, [DONE]."""
        f = self.faults
        n_flood = int(f.get("flood_n", 300))
        events: list[bytes] = []
        if chat:
            events.append(completion_event(0, True, role=True))
        for i in range(n_out):
            token = completion_event(i, chat)
            if kind == "flood_repeat":  # the same token chunk again and again
                events += [token] * n_flood
                continue
            events.append(token)
            if kind is not None and kind.startswith("flood_"):
                events += flood(kind, chat, n_flood)
            if kind == "deep_event" and i == 0:
                events.append(b"data: " + deep_json() + b"\n\n")
            if kind == "deep_error_event" and i == 0:
                events.append(b'data: {"error":' + deep_json() + b"}\n\n")
        if kind == "deep_usage":
            events.append(b'data: {"usage":{"completion_tokens":1,"x":' + deep_json() + b"}}\n\n")
        if not f.get("no_usage"):
            events.append(usage_event(f.get("usage_prompt", 8), f.get("usage_completion", n_out)))
        events.append(b"data: [DONE]\n\n")
        return events


@contextlib.contextmanager
def bad_server(**faults: Any) -> Iterator[BadServer]:
    """``with bad_server(tokenize="empty") as srv: ...``"""
    with BadServer(faults) as srv:
        yield srv
