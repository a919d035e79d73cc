"""The streaming HTTP client: one request in, one timed record out.

Streams /v1/completions or /v1/chat/completions through a lean HTTP/1.1
transport (tuner.bench.http, framing parsed by httptools; benchmarks/ plugs
aiohttp in for comparison); control calls go through tuner.bench.control
(httpx). Whatever bytes arrived get one ``perf_counter``, are split into SSE
events on blank lines, and a token chunk is recognised by its bytes
(``"choices":[{``) without decoding JSON; only the rare other events (usage,
errors, chat role chunks, non-compact JSON from other servers) are parsed.
No logging, no text accumulation, nothing blocking: the client's own cost
must not show up in the latencies it reports. Timing semantics follow
`vllm bench serve` so results compare one to one: TTFT is the first chunk
with a choice, ITL the gaps between chunks, latency ends at the last token
chunk — except that a chat chunk carrying no content (the role chunk vLLM
sends first) is not a token: counting it made mean ITL 25 % low at output
length 4 (issue 19; vLLM 0.32's openai-chat backend,
vllm/benchmarks/lib/endpoint_request_func.py ~line 433, counts any chunk with
choices and has the same bias).

Every request is bounded (issue 19 "Unbounded reads"): in time by the stall
watchdog — which counts only complete SSE events as progress, so a 1-byte/s
trickle is cut — and by a per-request deadline derived from the output
length; in size by a body cap derived from the output length and a cap on
one SSE event.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from tuner.bench.control import ControlClient
from tuner.bench.http import HttpError, StreamingHttp, StreamTransport
from tuner.bench.prompts import Prompt
from tuner.bench.workload import Endpoint

_TOKEN_MARK = b'"choices":[{'
_USAGE_MARK = b'"usage":{'
_DONE = b"data: [DONE]"
_ROLE_MARK = b'"role":'

MAX_EVENT_BYTES = 1024 * 1024  # one SSE event; vLLM's are ~250 bytes per token
BODY_BASE_BYTES = 1024 * 1024
BODY_PER_TOKEN_BYTES = 64 * 1024  # a token chunk with top-20 logprobs is ~6 KiB
DEADLINE_PER_TOKEN_S = 1.0  # slower than any server decodes one token under load

# Makes the streaming transport for a base URL and extra headers.
TransportFactory = Callable[[str, dict[str, str]], StreamTransport]


def request_deadline_s(
    output_len: int, request_timeout_s: float, stall_timeout_s: float | None
) -> float:
    """The overall deadline of one request, derived from its output length.

    A server that keeps sending (a never-ending stream, a trickle) is cut
    here even when the stall watchdog is satisfied: the stall allowance for
    the first token plus DEADLINE_PER_TOKEN_S per output token, never above
    the user's request timeout.
    """
    first = stall_timeout_s if stall_timeout_s is not None else request_timeout_s
    return min(request_timeout_s, first + output_len * DEADLINE_PER_TOKEN_S)


def max_body_bytes(output_len: int) -> int:
    """The most body bytes a stream of ``output_len`` tokens may carry."""
    return BODY_BASE_BYTES + output_len * BODY_PER_TOKEN_BYTES


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
        usage_ignored: Why the server's usage count was not believed ("" if it was).
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
    usage_ignored: str = ""

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
    (tuner.bench.http) unless ``transport_factory`` supplies another (the
    aiohttp reference lives in benchmarks/client_ceiling.py); connections are
    kept alive and reused. Control calls (/v1/models, /tokenize, /metrics) use
    a separate bounded httpx client so a scrape never waits for, nor takes, a
    request slot.

    Args:
        base_url: Server base URL without credentials.
        model: Model name for requests.
        endpoint: completions or chat.
        concurrency: Most requests in flight (informational for the transport).
        request_timeout_s: The user's cap on one request.
        stall_timeout_s: Cut a request when no SSE event arrives for this long.
        extra_body: Merged into each request body.
        headers: Extra headers for every call (e.g. Authorization).
        transport_factory: Makes the streaming transport (default: StreamingHttp).
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
        headers: dict[str, str] | None = None,
        transport_factory: TransportFactory | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.endpoint = endpoint
        path = "/v1/completions" if endpoint == "completions" else "/v1/chat/completions"
        self.url = self.base_url + path
        self._path = path
        self._headers = dict(headers or {})
        self._factory: TransportFactory = transport_factory or StreamingHttp
        self._http: StreamTransport | None = None
        self._limit = concurrency or 0
        self._request_timeout_s = request_timeout_s
        self._stall_timeout_s = stall_timeout_s
        self._extra = extra_body or {}
        self._control: ControlClient | None = None
        self._active: dict[asyncio.Task[Any], RequestRecord] = {}
        self._watchdog: asyncio.Task[None] | None = None

    async def __aenter__(self) -> BenchClient:
        self._http = self._factory(self.base_url, self._headers)
        self._control = ControlClient(self.base_url, self._headers)
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
        if self._control is not None:
            await self._control.aclose()
            self._control = None

    async def _watch_stalls(self, limit: float) -> None:
        """Cancel requests that made no progress for ``limit`` seconds.

        One task for all requests instead of a per-read timer: ``rec.end`` is
        bumped when the head arrives and on every complete SSE event (a plain
        attribute store; bytes alone do not count, so a trickle is cut), and
        this checks it a few times per ``limit``.
        """
        period = max(0.02, min(limit / 4.0, 1.0))
        while True:
            await asyncio.sleep(period)
            now = perf_counter()
            for task, rec in list(self._active.items()):
                if now - rec.end > limit and not rec.error_kind:
                    rec.error_kind = "stall"
                    rec.error = f"no complete event from the server for {limit:g} s"
                    task.cancel()

    @property
    def control(self) -> ControlClient:
        """The open client for control calls (only inside the context manager)."""
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
        """GET a JSON document from the server (e.g. /v1/models); ControlError on failure."""
        return await self.control.get_json(path, timeout_s)

    async def post_json(self, path: str, payload: dict[str, Any], timeout_s: float = 30.0) -> Any:
        """POST JSON and return the JSON answer (e.g. /tokenize); ControlError on failure."""
        return await self.control.post_json(path, payload, timeout_s)

    async def get_text(self, path: str, timeout_s: float = 5.0) -> str | None:
        """GET a text page, or None when the server has none (404, error, too big)."""
        return await self.control.get_text(path, timeout_s)

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
        sink = _SseSink(rec, live, chat=self.endpoint == "chat")
        rec.start = rec.end = perf_counter()
        rec.arrival = rec.start if arrival is None else arrival
        task = asyncio.current_task()
        if task is not None:
            self._active[task] = rec
        deadline = request_deadline_s(
            prompt.output_len, self._request_timeout_s, self._stall_timeout_s
        )
        try:
            await self._stream(rec, data, sink, deadline)
        except asyncio.CancelledError:
            if rec.error_kind != "stall" or task is None:
                raise
            task.uncancel()  # our own watchdog cut it: a counted failure, not a cancel
        except TimeoutError:
            rec.error_kind = "timeout"
            rec.error = f"request took longer than {deadline:g} s"
        except HttpError as exc:
            rec.error_kind = exc.kind
            rec.error = str(exc)
        finally:
            if task is not None:
                self._active.pop(task, None)
        rec.end = perf_counter()
        _finish_record(rec, sink)
        if rec.error_kind:
            live.failed += 1
        else:
            live.done += 1
        return rec

    async def _stream(
        self, rec: RequestRecord, data: bytes, sink: _SseSink, deadline_s: float
    ) -> None:
        """POST through the transport, cut at the deadline and the body cap."""
        assert self._http is not None
        async with asyncio.timeout(deadline_s):
            status, err = await self._http.post_stream(
                self._path, data, sink, sink.touch, max_body_bytes(rec.expected_output_len)
            )
        if status != 200:
            rec.error_kind = f"HTTP {status}"
            rec.error = _error_message(err)


def _finish_record(rec: RequestRecord, sink: _SseSink) -> None:
    """Classify an ended stream and sanity-check the server's usage counts."""
    if not rec.error_kind:
        if not rec.chunk_times:
            rec.error_kind = "no tokens"
            rec.error = "the stream ended without a single token chunk"
        elif not sink.saw_done:
            rec.error_kind = "truncated"
            rec.error = "the stream ended before its [DONE] marker"
    n = len(rec.chunk_times)
    # A chunk may carry several tokens but never more than asked for (max_tokens);
    # a count beyond both is a lying server (issue 19: 1.5e15 tok/s), not a fast one.
    if rec.output_tokens > max(rec.expected_output_len, n) or rec.output_tokens < 0:
        rec.usage_ignored = (
            f"usage said {rec.output_tokens} completion tokens for max_tokens "
            f"{rec.expected_output_len} and {n} chunks; counted the chunks"
        )
        rec.output_tokens = 0
    if sink.usage_prompt is not None:
        known = rec.prompt_len
        limit = 4 * known + 4096 if known > 0 else 10_000_000
        if 0 < sink.usage_prompt <= limit:
            rec.prompt_len = sink.usage_prompt
        elif not rec.usage_ignored:
            rec.usage_ignored = f"usage said {sink.usage_prompt} prompt tokens; not believed"


class _SseSink:
    """Splits a response body into SSE events and times the token chunks.

    Called with whatever bytes arrived and the read's ``perf_counter``; a
    token chunk is recognised by its bytes, everything else goes to
    ``_slow_event``. The pending partial event is a bytearray grown in place
    and searched only over its new bytes, so a server that never ends an
    event costs linear time, and it is cut at MAX_EVENT_BYTES.
    """

    __slots__ = ("buf", "chat", "live", "rec", "saw_done", "times", "usage_prompt")

    def __init__(self, rec: RequestRecord, live: LiveCounters, chat: bool = False) -> None:
        self.rec = rec
        self.live = live
        self.chat = chat
        self.times = rec.chunk_times
        self.buf = bytearray()
        self.saw_done = False
        self.usage_prompt: int | None = None

    def touch(self, now: float) -> None:
        """Note progress (the response head arrived) for the stall watchdog."""
        self.rec.end = now

    def __call__(self, chunk: bytes, now: float) -> None:
        buf = self.buf
        if b"\r" in chunk or (buf and buf[-1] == 13):
            # CRLF-framed events: normalise, also across a read boundary.
            if buf and buf[-1] == 13 and chunk[:1] == b"\n":
                del buf[-1]
            chunk = chunk.replace(b"\r\n", b"\n")
        if buf:
            start = max(0, len(buf) - 1)
            buf += chunk
            cut = buf.find(b"\n\n", start)
            if cut < 0:
                if len(buf) > MAX_EVENT_BYTES:
                    self._too_long()
                return
            cut = buf.rfind(b"\n\n")
            events = bytes(buf[:cut]).split(b"\n\n")
            del buf[: cut + 2]
        else:
            events = chunk.split(b"\n\n")
            rest = events.pop()
            if rest:
                buf += rest
                if len(buf) > MAX_EVENT_BYTES:
                    self._too_long()
                    return
            if not events:
                return
        self.rec.end = now  # a complete event: progress for the stall watchdog
        n = 0
        chat = self.chat
        for ev in events:
            if _TOKEN_MARK in ev and _USAGE_MARK not in ev and not (chat and _ROLE_MARK in ev):
                n += 1
            elif ev == _DONE:
                self.saw_done = True
            elif ev and _slow_event(ev, self):
                n += 1
        if n:
            self.times.extend([now] * n)
            self.live.chunks += n

    def _too_long(self) -> None:
        self.buf.clear()
        if not self.rec.error_kind:
            self.rec.error_kind = "bad event"
            self.rec.error = f"a stream event grew over {MAX_EVENT_BYTES // 1024} KiB unended"
        raise HttpError("bad event", self.rec.error)


def _slow_event(ev: bytes, sink: _SseSink) -> bool:
    """Parse an event the fast path did not recognise; True if it is a token chunk.

    Handles the usage report, error events, SSE comments, chat role chunks
    and servers that write JSON with spaces. Updates the record in place.
    """
    rec = sink.rec
    payload = b""
    for line in ev.split(b"\n"):
        if line.startswith(b"data:"):
            payload += line[5:].strip()
    if not payload:
        return False
    if payload == b"[DONE]":
        sink.saw_done = True
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
        ct, pt = usage.get("completion_tokens"), usage.get("prompt_tokens")
        if isinstance(ct, int) and not isinstance(ct, bool):
            rec.output_tokens = ct
        if isinstance(pt, int) and not isinstance(pt, bool):
            sink.usage_prompt = pt
    if "error" in data and not data.get("choices"):
        err = data["error"]
        rec.error_kind = "error event"
        rec.error = str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        return False
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return False
    if not sink.chat:
        return True
    first = choices[0]
    delta = first.get("delta") if isinstance(first, dict) else None
    if not isinstance(delta, dict):
        return False
    # A token is content, reasoning or a tool call; the role-only chunk is none.
    return any(delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls"))


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel tasks and wait for them, so nothing outlives a failed run."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
