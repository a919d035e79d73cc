"""Misbehaving OpenAI-compatible servers on loopback, for the bench's hostile-server suite.

A fake *server* at the HTTP boundary (named as one). ``BadServer(faults)``
runs a tiny HTTP/1.1 server on 127.0.0.1 in its own thread and event loop
(so async tests and CLI tests both use it) that behaves like a correct vLLM
server except where ``faults`` say otherwise (issue 19's hostile-server
sweep): /v1/models shapes, /tokenize answers, chat-only, no usage, no or
broken /metrics, HTTP 500s, never-ending or trickling streams, endless
headers or events, bytes split at every boundary, lying usage counts and
markup in server text. Every loop here is bounded (by a byte or time cap),
so a client bug shows up as a failed assertion, never a hung test.
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


def usage_event(prompt: int, completion: int) -> bytes:
    body = {
        "id": "cmpl-1",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


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
        kind = f.get("stream")
        if kind == "endless_headers":
            w.write(b"HTTP/1.1 200 OK\r\nx-pad: ")
            return await self._endless(w, b"a" * 1024)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        head += b"transfer-encoding: chunked\r\n\r\n"
        events: list[bytes] = []
        if chat:
            events.append(completion_event(0, True, role=True))
        events += [completion_event(i, chat) for i in range(n_out)]
        if not f.get("no_usage"):
            events.append(usage_event(8, f.get("usage_completion", n_out)))
        events.append(b"data: [DONE]\n\n")
        if kind == "never_ends":
            w.write(head)
            return await self._endless(w, _chunk(completion_event(1, chat)))
        if kind == "endless_event":
            w.write(head + _chunk(b'data: {"choices":[{"text":"'))
            return await self._endless(w, _chunk(b"x" * 8192))
        if kind == "trickle":
            w.write(head)
            return await self._endless(w, _chunk(b"d"), gap_s=0.05)
        if kind == "error_event" and seq % 2 == 1:
            events = [*events[:2], b'data: {"error":{"message":"engine died [/]"}}\n\n']
        wire = head + b"".join(_chunk(e) for e in events) + b"0\r\n\r\n"
        if kind == "every_byte":
            for i in range(len(wire)):  # one byte per write: every split point on the wire
                w.write(wire[i : i + 1])
                await w.drain()
                await asyncio.sleep(0)
            return True
        w.write(head)
        for e in events[:-1]:
            await asyncio.sleep(self.itl_s)
            w.write(_chunk(e))
            await w.drain()
        w.write(_chunk(events[-1]) + b"0\r\n\r\n")
        await w.drain()
        return True


@contextlib.contextmanager
def bad_server(**faults: Any) -> Iterator[BadServer]:
    """``with bad_server(tokenize="empty") as srv: ...``"""
    with BadServer(faults) as srv:
        yield srv
