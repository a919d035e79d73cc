"""Server-sent events to token timings: what counts as a token, and what a count may be.

The sink gets a response body as it arrives, splits it into SSE events on
blank lines and times the token chunks. What a token chunk is follows vLLM's
own benchmark (vllm/benchmarks/lib/endpoint_request_func.py): for
completions every chunk with a choice — vLLM sends one per generated token,
with empty text where the detokenizer holds back an incomplete UTF-8
sequence or a special token; for chat a delta with content, reasoning or
tool calls (the role chunk vLLM sends first, and any other empty delta, is
no token: counting it made mean ITL 25 % low at output length 4, issue
19). Keep-alive comments, usage and error events and ``[DONE]`` are never
tokens. The common token chunk is recognised by its bytes (``"choices":[{``
and a ``"text":"`` or ``"content":"`` followed by printable text) without
decoding JSON; every other event is parsed, with :func:`tuner.bounded.loads`
so that deeply nested JSON is a failed request, not a ``RecursionError``.

Output tokens are counted as vLLM's benchmark counts them (serve.py
``calculate_metrics``): ``usage.completion_tokens`` when the server sends a
believable one (tunelab always asks for it with
``stream_options.include_usage``) — a whole number from 1 to max_tokens —,
else from the content. vLLM tokenizes the streamed text there; the client
keeps no text (its cost would show in the latencies), so it counts the
token chunks, each of which carries at least one token, and never more
than max_tokens. A usage count that is no whole number, negative, NaN or
beyond max_tokens is not believed, and the reason is kept on the record.

Chunk floods (issue 26): an honest server sends at most one chunk per token,
so chunks beyond the token count are padding. Timing and counting never
take a chunk just because it arrived: when an answer has more token chunks
than tokens, its chunks without text, then its whitespace-only chunks are
dropped (and noted); more than :func:`flood_limit` chunks with real text
fail the request as ``chunk flood`` — already during the stream against
max_tokens, so a flood is cut early. ITL is the gaps between the chunks
kept. Only text, usage, error and ``[DONE]`` events (and, within the token
count, chunks without text) count as progress for the stall watchdog, so a
server trickling keep-alive comments or empty chunks is cut as stalled.
"""

from __future__ import annotations

import math
from typing import Any

from tuner.bench.http import HttpError
from tuner.bench.record import LiveCounters, RequestRecord
from tuner.bounded import InputTooLargeError, loads

MAX_EVENT_BYTES = 1024 * 1024  # one SSE event; vLLM's are ~250 bytes per token
FLOOD_SLACK = 4  # token chunks an answer may carry beyond its token count

_TOKEN_MARK = b'"choices":[{'
_USAGE_MARK = b'"usage":{'
_DONE = b"data: [DONE]"
_TEXT_MARKS = (b'"text":"',)
_CHAT_MARKS = (b'"content":"', b'"reasoning_content":"', b'"reasoning":"')
_CHAT_KEYS = ("content", "reasoning_content", "reasoning", "tool_calls")

# What one event is. The first three are token chunks (timed; their code is kept per chunk).
CONTENT = 1  # text that is not only whitespace
BLANK = 2  # whitespace-only text
EMPTY = 3  # a completions choice without text (vLLM: a held-back or special token)
IGNORED = 4  # no token and no progress: a comment, a chat role-only or empty delta
SIGNAL = 5  # no token, but progress: usage, an error event, [DONE]

_CONTENT_BYTE = bytes([CONTENT])
# Padding left out when an answer has more token chunks than tokens, in this order.
_DROPPED = (
    (EMPTY, "empty chunks", "chunks without text"),
    (BLANK, "whitespace chunks", "whitespace-only chunks"),
)

_MISSING: Any = object()


def flood_limit(tokens: int) -> int:
    """Most chunks with text an answer of ``tokens`` tokens may carry before it is a flood.

    One chunk per token is what an honest server sends at most; the slack
    covers servers that split a final token or add a closing chunk.
    """
    return tokens + max(FLOOD_SLACK, tokens // 4)


def _fast_content(ev: bytes, marks: tuple[bytes, ...]) -> bool:
    """True when ``ev``'s text value is plainly non-blank (no escapes, not spaces only).

    False sends the event to the slow path, which decides exactly; this only
    spares the common case a JSON decode.
    """
    for mark in marks:
        i = ev.find(mark)
        if i >= 0:
            i += len(mark)
            j = ev.find(b'"', i)
            if j <= i:
                return False
            value = ev[i:j]
            return b"\\" not in value and bool(value.strip(b" "))
    return False


def _text_kind(value: object) -> int:
    """CONTENT, BLANK or EMPTY for one text field (a string, or a list of tool calls)."""
    if isinstance(value, str) and value:
        return CONTENT if value.strip() else BLANK
    if isinstance(value, list) and value:
        return CONTENT
    return EMPTY


def _choice_kind(choice: object, chat: bool) -> int:
    """What the first choice of a chunk carries (chat: an empty delta is no token at all)."""
    if not chat:
        return _text_kind(choice.get("text")) if isinstance(choice, dict) else EMPTY
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return IGNORED
    kinds = {_text_kind(delta.get(k)) for k in _CHAT_KEYS}
    return CONTENT if CONTENT in kinds else BLANK if BLANK in kinds else IGNORED


def _short(value: object) -> str:
    """A server's value for a message: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def whole_number(value: object) -> int | None:
    """``value`` as a token count: an int, or a float that is a finite whole number; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


class SseSink:
    """Splits a response body into SSE events and times the token chunks.

    Called with whatever bytes arrived and the read's ``perf_counter``; a
    token chunk is recognised by its bytes, everything else goes to
    :func:`_slow_event`. The pending partial event is a bytearray grown in
    place and searched only over its new bytes, so a server that never ends
    an event costs linear time, and it is cut at MAX_EVENT_BYTES. Each timed
    chunk's kind (CONTENT, BLANK, EMPTY) is kept, one byte per chunk, so the
    padding of a flood can be told from the tokens when the stream ends.
    """

    __slots__ = (
        "buf",
        "chat",
        "content",
        "ignored",
        "kinds",
        "limit",
        "live",
        "marks",
        "rec",
        "saw_done",
        "streamed",
        "times",
        "usage_completion",
        "usage_prompt",
    )

    def __init__(self, rec: RequestRecord, live: LiveCounters, chat: bool = False) -> None:
        self.rec = rec
        self.live = live
        self.chat = chat
        self.marks = _CHAT_MARKS if chat else _TEXT_MARKS
        self.times = rec.chunk_times
        self.kinds = bytearray()  # per timed chunk: CONTENT, BLANK or EMPTY
        self.content = 0  # timed chunks with real text
        self.buf = bytearray()
        self.saw_done = False
        self.ignored = 0  # events that were no token and no progress
        self.limit = flood_limit(rec.expected_output_len)
        self.usage_completion: Any = _MISSING
        self.usage_prompt: Any = _MISSING
        self.streamed = 0  # token chunks added to live.tokens so far

    def touch(self, now: float) -> None:
        """Note progress (the response head arrived) for the stall watchdog."""
        self.rec.end = now

    def __call__(self, chunk: bytes, now: float) -> None:
        events = self._complete_events(chunk)
        if not events:
            return
        kinds = bytearray()
        progress = False
        marks = self.marks
        for ev in events:
            if _TOKEN_MARK in ev and _USAGE_MARK not in ev and _fast_content(ev, marks):
                kinds += _CONTENT_BYTE
            elif ev == _DONE:
                self.saw_done = progress = True
            elif ev:
                kind = _slow_event(ev, self)
                if kind <= EMPTY:
                    kinds.append(kind)
                elif kind == SIGNAL:
                    progress = True
                else:
                    self.ignored += 1
        if kinds:
            self._timed(kinds, now)
            # Chunks without text are progress only while they could still be tokens.
            progress = progress or CONTENT in kinds or len(self.times) <= self.limit
        if progress:
            self.rec.end = now  # progress for the stall watchdog

    def _timed(self, kinds: bytearray, now: float) -> None:
        """Record this read's token chunks; cut the stream once real text floods."""
        n = len(kinds)
        self.times.extend([now] * n)
        self.kinds += kinds
        self.live.chunks += n
        self.live.tokens += n  # one token a chunk until the stream's count settles it
        self.streamed += n
        self.content += kinds.count(CONTENT)
        if self.content > self.limit:
            self.rec.fail(
                "chunk flood",
                f"the server sent more than {self.limit} chunks with text for max_tokens "
                f"{self.rec.expected_output_len} (it repeats chunks or ignores max_tokens); cut",
            )
            raise HttpError("chunk flood", self.rec.error)

    def _complete_events(self, chunk: bytes) -> list[bytes]:
        """The events this read completes (the unfinished rest stays buffered)."""
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
                return []
            cut = buf.rfind(b"\n\n")
            events = bytes(buf[:cut]).split(b"\n\n")
            del buf[: cut + 2]
            return events
        events = chunk.split(b"\n\n")
        rest = events.pop()
        if rest:
            buf += rest
            if len(buf) > MAX_EVENT_BYTES:
                self._too_long()
        return events

    def _too_long(self) -> None:
        self.buf.clear()
        self.rec.fail(
            "bad event", f"a stream event grew over {MAX_EVENT_BYTES // 1024} KiB unended"
        )
        raise HttpError("bad event", self.rec.error)


def _slow_event(ev: bytes, sink: SseSink) -> int:
    """Parse an event the fast path did not recognise; what it is (CONTENT ... SIGNAL).

    Handles the usage report, error events, SSE comments, chat role chunks,
    empty deltas and servers that write JSON with spaces. Updates the record
    and the sink in place.

    Raises:
        HttpError: The event is not JSON, or nests too deeply: the record is
            failed with the reason and the stream is cut (nothing after it
            could be trusted).
    """
    rec = sink.rec
    payload = b""
    for line in ev.split(b"\n"):
        if line.startswith(b"data:"):
            payload += line[5:].strip()
    if not payload:
        return IGNORED  # a comment (keep-alive), or an event without data
    if payload == b"[DONE]":
        sink.saw_done = True
        return SIGNAL
    try:
        data = loads(payload, what="stream event")
    except InputTooLargeError as exc:
        rec.fail("bad event", str(exc))
        raise HttpError("bad event", rec.error) from None
    except ValueError:
        rec.fail("bad event", f"unparseable stream event: {payload[:200]!r}")
        raise HttpError("bad event", rec.error) from None
    if not isinstance(data, dict):
        return IGNORED
    kind = IGNORED
    usage = data.get("usage")
    if isinstance(usage, dict):
        sink.usage_completion = usage.get("completion_tokens")
        sink.usage_prompt = usage.get("prompt_tokens")
        kind = SIGNAL
    if "error" in data and not data.get("choices"):
        err = data["error"]
        rec.fail(
            "error event", str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        )
        return SIGNAL
    choices = data.get("choices")
    if isinstance(choices, list) and choices:
        found = _choice_kind(choices[0], sink.chat)
        return found if found != IGNORED else kind
    return kind


def finish_record(rec: RequestRecord, sink: SseSink) -> None:
    """Settle an ended stream: its token count, floods, failure class and notes."""
    tokens = _believed_usage(rec, sink)
    bound = tokens if tokens is not None else rec.expected_output_len
    _drop_padding(rec, sink, bound)
    chunks = len(rec.chunk_times)
    if chunks > flood_limit(bound):
        what = f"max_tokens {bound}" if tokens is None else f"{tokens} tokens (its usage)"
        rec.fail("chunk flood", f"{chunks} chunks with text for {what}; not a token stream")
    if not chunks and not sink.saw_done and bytes(sink.buf.lstrip()[:1]) in (b"{", b"["):
        rec.fail(
            "no tokens", "the answer was plain JSON, not an event stream (stream: true ignored)"
        )
    elif not chunks:
        rec.fail("no tokens", "the stream ended without a single token chunk")
    elif not sink.saw_done:
        rec.fail("truncated", "the stream ended before its [DONE] marker")
    rec.output_tokens = tokens if tokens is not None else min(chunks, rec.expected_output_len)
    # The live count took one token a chunk; a chunk may carry several (vLLM's stream
    # interval, speculative decoding): the request's settled count corrects it now.
    sink.live.tokens += rec.output_tokens - sink.streamed
    sink.streamed = rec.output_tokens
    if sink.ignored > flood_limit(bound):
        rec.notes["ignored events"] = (
            f"{sink.ignored} events that carry no token (keep-alive comments, role-only or "
            "empty deltas) were not counted"
        )
    _believe_prompt(rec, sink)


def _drop_padding(rec: RequestRecord, sink: SseSink, bound: int) -> None:
    """More token chunks than tokens: leave out the ones without text, then whitespace-only."""
    kinds = sink.kinds
    for kind, note, words in _DROPPED:
        if len(rec.chunk_times) <= bound:
            return
        dropped = kinds.count(kind)
        if not dropped:
            continue
        keep = [i for i, k in enumerate(kinds) if k != kind]
        rec.chunk_times[:] = [rec.chunk_times[i] for i in keep]
        kinds = bytearray(kinds[i] for i in keep)
        rec.notes[note] = f"{dropped} {words} beyond the {bound} tokens were not counted"
    sink.kinds = kinds


def _believed_usage(rec: RequestRecord, sink: SseSink) -> int | None:
    """usage.completion_tokens when it is a count from 1 to max_tokens; else None, with why."""
    raw = sink.usage_completion
    if raw is _MISSING or raw is None:
        return None
    count = whole_number(raw)
    expected = rec.expected_output_len
    if count is None:
        why = f"usage completion_tokens {_short(raw)} is not a whole number"
    elif count < 0 or count > expected:
        why = f"usage said {count} completion tokens for max_tokens {expected}"
    elif count == 0:
        if not rec.chunk_times:
            return None
        why = f"usage said 0 completion tokens for {len(rec.chunk_times)} token chunks"
    else:
        return count
    rec.usage_ignored = f"{why}; not believed, counted the token chunks"
    rec.notes["usage ignored"] = rec.usage_ignored
    return None


def _believe_prompt(rec: RequestRecord, sink: SseSink) -> None:
    """Take usage.prompt_tokens over the estimate when it is plausible, else note why not."""
    raw = sink.usage_prompt
    if raw is _MISSING or raw is None:
        return
    count = whole_number(raw)
    known = rec.prompt_len
    limit = 4 * known + 4096 if known > 0 else 10_000_000
    if count is not None and 0 < count <= limit:
        rec.prompt_len = count
        return
    why = f"usage said {_short(raw)} prompt tokens; not believed"
    rec.notes.setdefault("usage ignored", why)
    if not rec.usage_ignored:
        rec.usage_ignored = why
