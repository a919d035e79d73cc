"""The streaming HTTP client: one request in, one timed record out.

Streams /v1/completions or /v1/chat/completions through a lean HTTP/1.1
transport (tuner.bench.http; aiohttp remains selectable and is used for
control calls). Whatever bytes arrived get one ``perf_counter``, are split
into SSE events on blank lines, and a token chunk is recognised by its
bytes (``"choices":[{``) without decoding JSON; only the rare other events
(usage, errors, non-compact JSON from other servers) are parsed. No logging, no text accumulation, nothing blocking: the client's own
cost must not show up in the latencies it reports. Timing semantics follow
`vllm bench serve` so results compare one to one: TTFT is the first chunk with
a choice, ITL the gaps between chunks, latency ends at the last token chunk.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Literal

import aiohttp

from tuner.bench.http import HttpError, StreamingHttp
from tuner.bench.prompts import Prompt
from tuner.bench.workload import Endpoint

_TOKEN_MARK = b'"choices":[{'
_USAGE_MARK = b'"usage":{'
_DONE = b"data: [DONE]"
_HEADERS = {"Content-Type": "application/json"}

Transport = Literal["lean", "aiohttp"]


@dataclass(slots=True)
class LiveCounters:
    """Totals the progress reporter reads while requests stream."""

    chunks: int = 0
    done: int = 0
    failed: int = 0


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request, in perf_counter seconds.

    Attributes:
        prompt_len: Prompt tokens (the usage report wins over the estimate).
        expected_output_len: max_tokens sent.
        arrival: When the schedule released the request (before any wait for
            a concurrency slot).
        start: When the HTTP request was sent.
        chunk_times: Arrival time of every token chunk.
        output_tokens: completion_tokens from the usage report (0 if absent).
        end: When the stream finished or broke.
        error_kind: Short failure class for counting ("" on success).
        error: Failure detail.
    """

    prompt_len: int
    expected_output_len: int
    arrival: float = 0.0
    start: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    end: float = 0.0
    error_kind: str = ""
    error: str = ""

    @property
    def success(self) -> bool:
        """True when the stream completed and carried at least one token."""
        return not self.error_kind

    @property
    def ttft(self) -> float:
        """Seconds from send to the first token chunk."""
        return self.chunk_times[0] - self.start if self.chunk_times else 0.0

    @property
    def latency(self) -> float:
        """Seconds from send to the last token chunk (vLLM's E2EL)."""
        return self.chunk_times[-1] - self.start if self.chunk_times else 0.0

    @property
    def itls(self) -> list[float]:
        """Gaps between consecutive token chunks, in seconds."""
        t = self.chunk_times
        return [b - a for a, b in itertools.pairwise(t)]

    @property
    def queue_time(self) -> float:
        """Seconds the request waited for a concurrency slot."""
        return self.start - self.arrival


def _error_message(body: bytes) -> str:
    """The human message inside an OpenAI-style error body, else the raw text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"][:300]
        if isinstance(data.get("message"), str):
            return data["message"][:300]
    return text[:300]


class BenchClient:
    """A streaming OpenAI-API client bound to one server, model and endpoint.

    Use as an async context manager. Streams go through the lean transport
    (tuner.bench.http) by default, or through aiohttp with
    ``transport="aiohttp"``; connections are kept alive and reused either
    way. Control calls (/v1/models, /tokenize, /metrics) use a separate small
    aiohttp session so a scrape never waits for, nor takes, a request slot.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        endpoint: Endpoint = "completions",
        *,
        concurrency: int | None = None,
        request_timeout_s: float = 600.0,
        stall_timeout_s: float | None = 120.0,
        extra_body: dict[str, Any] | None = None,
        transport: Transport = "lean",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = endpoint
        path = "/v1/completions" if endpoint == "completions" else "/v1/chat/completions"
        self.url = self.base_url + path
        self._path = path
        self._transport = transport
        self._http: StreamingHttp | None = None
        self._limit = concurrency or 0
        # No sock_read timeout: aiohttp re-arms that timer on every read, which
        # cost ~30 % of the client's throughput; a watchdog task checks stalls.
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=30.0)
        self._request_timeout_s = request_timeout_s
        self._stall_timeout_s = stall_timeout_s
        self._extra = extra_body or {}
        self._session: aiohttp.ClientSession | None = None
        self._control: aiohttp.ClientSession | None = None
        self._active: dict[asyncio.Task[Any], RequestRecord] = {}
        self._watchdog: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BenchClient:
        connector = aiohttp.TCPConnector(
            limit=self._limit, limit_per_host=self._limit, keepalive_timeout=60
        )
        self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        if self._transport == "lean":
            self._http = StreamingHttp(self.base_url)
        self._control = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=2), trust_env=False
        )
        if self._stall_timeout_s is not None:
            self._watchdog = asyncio.create_task(self._watch_stalls(self._stall_timeout_s))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
            self._watchdog = None
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._control is not None:
            await self._control.close()
            self._control = None

    async def _watch_stalls(self, limit: float) -> None:
        """Cancel requests that received no byte for ``limit`` seconds.

        One task for all requests instead of a per-read timer: ``rec.end`` is
        bumped on every read (a plain attribute store), and this checks it a
        few times per ``limit``.
        """
        period = max(0.02, min(limit / 4.0, 1.0))
        while True:
            await asyncio.sleep(period)
            now = perf_counter()
            for task, rec in list(self._active.items()):
                if now - rec.end > limit and not rec.error_kind:
                    rec.error_kind = "stall"
                    rec.error = f"no data from the server for {limit:g} s"
                    task.cancel()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The open streaming session (only inside the context manager)."""
        if self._session is None:
            raise RuntimeError("BenchClient used outside 'async with'")
        return self._session

    @property
    def control(self) -> aiohttp.ClientSession:
        """The open session for control calls (only inside the context manager)."""
        if self._control is None:
            raise RuntimeError("BenchClient used outside 'async with'")
        return self._control

    def body(self, prompt: Prompt) -> bytes:
        """The JSON request body; output length enforced by ignore_eos + min_tokens."""
        payload: dict[str, Any] = {"model": self.model, "stream": True}
        if self.endpoint == "completions":
            payload["prompt"] = prompt.prompt
            payload["max_tokens"] = prompt.output_len
        else:
            payload["messages"] = [{"role": "user", "content": prompt.prompt}]
            payload["max_completion_tokens"] = prompt.output_len
        payload["min_tokens"] = prompt.output_len
        payload["ignore_eos"] = True
        payload["stream_options"] = {"include_usage": True}
        payload.update(self._extra)
        return json.dumps(payload, separators=(",", ":")).encode()

    async def get_json(self, path: str, timeout_s: float = 10.0) -> Any:
        """GET a JSON document from the server (e.g. /v1/models)."""
        tmo = aiohttp.ClientTimeout(total=timeout_s)
        async with self.control.get(self.base_url + path, timeout=tmo) as resp:
            resp.raise_for_status()
            return await resp.json(content_type=None)

    async def post_json(self, path: str, payload: dict[str, Any], timeout_s: float = 30.0) -> Any:
        """POST JSON and return the JSON answer (e.g. /tokenize)."""
        tmo = aiohttp.ClientTimeout(total=timeout_s)
        async with self.control.post(self.base_url + path, json=payload, timeout=tmo) as resp:
            resp.raise_for_status()
            return await resp.json(content_type=None)

    async def get_text(self, path: str, timeout_s: float = 5.0) -> str | None:
        """GET a text document, or None when the server has none (404, error)."""
        tmo = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with self.control.get(self.base_url + path, timeout=tmo) as resp:
                if resp.status != 200:
                    return None
                return await resp.text()
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def send(
        self,
        prompt: Prompt,
        live: LiveCounters,
        body: bytes | None = None,
        arrival: float | None = None,
    ) -> RequestRecord:
        """Stream one request and time its chunks; never raises for server faults.

        Args:
            prompt: What to send.
            live: Counters updated as chunks arrive (for progress).
            body: Pre-built request body (else built here).
            arrival: When the schedule released it (default: now).

        Returns:
            The record; failures carry error_kind and error.
        """
        rec = RequestRecord(prompt.prompt_len, prompt.output_len)
        data = body if body is not None else self.body(prompt)
        sink = _SseSink(rec, live)
        rec.start = rec.end = perf_counter()
        rec.arrival = rec.start if arrival is None else arrival
        task = asyncio.current_task()
        if task is not None:
            self._active[task] = rec
        try:
            if self._http is not None:
                await self._stream_lean(rec, data, sink)
            else:
                await self._stream_aiohttp(rec, data, sink)
        except asyncio.CancelledError:
            if rec.error_kind != "stall" or task is None:
                raise
            task.uncancel()  # our own watchdog cut it: a counted failure, not a cancel
        except TimeoutError:
            rec.error_kind = "timeout"
            rec.error = f"request took longer than {self._request_timeout_s:g} s"
        except HttpError as exc:
            rec.error_kind = exc.kind
            rec.error = str(exc)
        except aiohttp.ClientPayloadError as exc:
            rec.error_kind = "disconnected"
            rec.error = f"stream broke mid-response: {exc}"
        except aiohttp.ServerDisconnectedError as exc:
            rec.error_kind = "disconnected"
            rec.error = f"server closed the connection: {exc}"
        except aiohttp.ClientConnectorError as exc:
            rec.error_kind = "connect error"
            rec.error = str(exc)
        except aiohttp.ClientError as exc:
            rec.error_kind = type(exc).__name__
            rec.error = str(exc)
        finally:
            if task is not None:
                self._active.pop(task, None)
        rec.end = perf_counter()
        if not rec.error_kind:
            if not rec.chunk_times:
                rec.error_kind = "no tokens"
                rec.error = "the stream ended without a single token chunk"
            elif not sink.saw_done:
                rec.error_kind = "truncated"
                rec.error = "the stream ended before its [DONE] marker"
        if rec.error_kind:
            live.failed += 1
        else:
            live.done += 1
        return rec

    async def _stream_lean(self, rec: RequestRecord, data: bytes, sink: _SseSink) -> None:
        """The default transport: tuner.bench.http, parsing inside data_received."""
        assert self._http is not None
        async with asyncio.timeout(self._request_timeout_s):
            status, err = await self._http.post_stream(self._path, data, sink, sink.touch)
        if status != 200:
            rec.error_kind = f"HTTP {status}"
            rec.error = _error_message(err)

    async def _stream_aiohttp(self, rec: RequestRecord, data: bytes, sink: _SseSink) -> None:
        """The aiohttp transport (kept to compare against; see client_ceiling.py)."""
        async with self.session.post(
            self.url, data=data, headers=_HEADERS, timeout=self._timeout
        ) as resp:
            if resp.status != 200:
                raw = await resp.content.read(4096)
                rec.error_kind = f"HTTP {resp.status}"
                rec.error = _error_message(raw) or (resp.reason or "")
                return
            content = resp.content
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                sink(chunk, perf_counter())
                if rec.error_kind:
                    break


class _SseSink:
    """Splits a response body into SSE events and times the token chunks.

    Called with whatever bytes arrived and the read's ``perf_counter``; a
    token chunk is recognised by its bytes, everything else goes to
    ``_slow_event``.
    """

    __slots__ = ("buf", "live", "rec", "saw_done", "times")

    def __init__(self, rec: RequestRecord, live: LiveCounters) -> None:
        self.rec = rec
        self.live = live
        self.times = rec.chunk_times
        self.buf = b""
        self.saw_done = False

    def touch(self, now: float) -> None:
        """Note that bytes arrived (for the stall watchdog)."""
        self.rec.end = now

    def __call__(self, chunk: bytes, now: float) -> None:
        self.rec.end = now
        if self.buf:
            chunk = self.buf + chunk
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n")
        events = chunk.split(b"\n\n")
        self.buf = events.pop()
        n = 0
        for ev in events:
            if _TOKEN_MARK in ev and _USAGE_MARK not in ev:
                n += 1
            elif ev == _DONE:
                self.saw_done = True
            elif _slow_event(ev, self.rec):
                n += 1
        if n:
            self.times.extend([now] * n)
            self.live.chunks += n


def _slow_event(ev: bytes, rec: RequestRecord) -> bool:
    """Parse an event the fast path did not recognise; True if it is a token chunk.

    Handles the usage report, error events, SSE comments and servers that
    write JSON with spaces. Updates ``rec`` in place.
    """
    payload = b""
    for line in ev.split(b"\n"):
        if line.startswith(b"data:"):
            payload += line[5:].strip()
    if not payload or payload == b"[DONE]":
        return False
    try:
        data = json.loads(payload)
    except ValueError:
        rec.error_kind = "bad event"
        rec.error = f"unparseable stream event: {payload[:200]!r}"
        return False
    if not isinstance(data, dict):
        return False
    usage = data.get("usage")
    if isinstance(usage, dict):
        if isinstance(usage.get("completion_tokens"), int):
            rec.output_tokens = usage["completion_tokens"]
        if isinstance(usage.get("prompt_tokens"), int):
            rec.prompt_len = usage["prompt_tokens"]
    if "error" in data and not data.get("choices"):
        err = data["error"]
        rec.error_kind = "error event"
        rec.error = str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        return False
    return bool(data.get("choices"))


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel tasks and wait for them, so nothing outlives a failed run."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
