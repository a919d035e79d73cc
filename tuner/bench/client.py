"""The streaming HTTP client: one request in, one timed record out.

Streams /v1/completions or /v1/chat/completions through a lean HTTP/1.1
transport (tuner.bench.http, framing parsed by httptools; benchmarks/ plugs
aiohttp in for comparison); control calls go through tuner.bench.control
(httpx). Whatever bytes arrived get one ``perf_counter`` and go to the SSE
sink (tuner.bench.sse). No logging, no text accumulation, nothing blocking:
the client's own cost must not show up in the latencies it reports. Timing
semantics follow `vllm bench serve` so results compare one to one: TTFT is
the first token chunk, ITL the gaps between token chunks, latency ends at the
last one. What a token chunk is (never a keep-alive comment, a chat role
chunk or the usage event), how output tokens are counted (the server's usage
when believable, else the chunks, never beyond max_tokens) and how the
padding of a chunk flood is left out is tuner.bench.sse's to decide (issues
19 and 26).

Every request is bounded (issue 19 "Unbounded reads"): in time by the stall
watchdog — which counts only token, usage and end events as progress, so a
1-byte/s trickle or a stream of keep-alive comments is cut — and by a
per-request deadline derived from the output length; in size by a body cap
derived from the output length and a cap on one SSE event. Every answer ends
the request as a record, failed with a reason where the server misbehaved;
a caller may watch each ended request (``on_end``) to stop a run early.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from time import perf_counter
from typing import Any

from tuner.bench.answer import AnswerSink
from tuner.bench.control import ControlClient
from tuner.bench.http import HttpError, StreamingHttp, StreamTransport
from tuner.bench.prompts import Prompt
from tuner.bench.record import LiveCounters, RequestRecord
from tuner.bench.sse import MAX_EVENT_BYTES, SseSink, finish_record
from tuner.bench.workload import Endpoint
from tuner.bounded import InputTooLargeError, loads

__all__ = [
    "MAX_EVENT_BYTES",
    "BenchClient",
    "LiveCounters",
    "RequestRecord",
    "TransportFactory",
    "cancel_all",
    "max_body_bytes",
    "request_deadline_s",
]

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


def _error_message(body: bytes) -> str:
    """The human message inside an OpenAI-style error body, else the raw text.

    The body is the server's: JSON nested too deeply for the parser (or not
    JSON at all) is shown as text, never raised on.
    """
    text = body.decode("utf-8", "replace").strip()
    try:
        data = loads(text, what="error body")
    except InputTooLargeError:
        return "an error body of JSON nested too deeply to read"
    except ValueError:  # not JSON
        return text[:300]
    if isinstance(data, dict):
        err = data.get("error", data)
        message = err.get("message") if isinstance(err, dict) else None
        if isinstance(message, str):
            return message[:300]
        message = data.get("message")
        if isinstance(message, str):
            return message[:300]
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
        on_end: Called with every record as its request ends (warm-ups too),
            e.g. by the run's failure guard (tuner.bench.run_limits).
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
        on_end: Callable[[RequestRecord], None] | None = None,
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
        self.on_end = on_end

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
                    rec.fail("stall", f"no token or end of stream from the server for {limit:g} s")
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
            turns = prompt.messages or (("user", str(prompt.prompt)),)
            payload["messages"] = [{"role": role, "content": text} for role, text in turns]
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
        *,
        keep_answer: bool = False,
    ) -> RequestRecord:
        """Stream one request and time its chunks; never raises for server faults.

        Args:
            prompt: What to send.
            live: Counters updated as chunks arrive (for progress).
            body: Pre-built request body (else built here).
            arrival: When the schedule released it (default: now).
            keep_answer: Keep the answer's text in ``rec.answer`` (a
                conversation's next turn sends it back); read from the raw
                body after the stream ends, so the timing path is unchanged.

        Returns:
            The record; failures carry error_kind and error.
        """
        rec = RequestRecord(prompt.prompt_len, prompt.output_len)
        data = body if body is not None else self.body(prompt)
        chat = self.endpoint == "chat"
        sink = AnswerSink(rec, live, chat) if keep_answer else SseSink(rec, live, chat)
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
        finish_record(rec, sink)
        if isinstance(sink, AnswerSink):
            rec.answer = sink.answer()
        if rec.error_kind:
            live.failed += 1
        else:
            live.done += 1
        if self.on_end is not None:
            self.on_end(rec)
        return rec

    async def _stream(
        self, rec: RequestRecord, data: bytes, sink: SseSink, deadline_s: float
    ) -> None:
        """POST through the transport, cut at the deadline and the body cap."""
        assert self._http is not None
        async with asyncio.timeout(deadline_s):
            status, err = await self._http.post_stream(
                self._path, data, sink, sink.touch, max_body_bytes(rec.expected_output_len)
            )
        if status != 200:
            rec.error_kind = f"HTTP {status}"
            rec.error = _error_message(err) or f"the server answered HTTP {status} with no text"


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel tasks and wait for them, so nothing outlives a failed run."""
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
