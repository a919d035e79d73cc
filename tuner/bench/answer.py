"""The answer's text, kept for a conversation's next turn (issue 30, multi-turn sessions).

The streaming client keeps no text: its cost would show in the latencies it
reports (tuner.bench.client). A multi-turn conversation must send each answer
back in its next turn, as a chat client does, so the engine's prefix cache
sees the history it would in production (vLLM caches the answer's blocks
too). :class:`AnswerSink` keeps the raw body bytes as they arrive — one
``bytearray`` append per read, nothing parsed — and the text is read from
them once the stream has ended, off the clock.
"""

from __future__ import annotations

from tuner.bench.record import LiveCounters, RequestRecord
from tuner.bench.sse import SseSink
from tuner.bounded import loads

_CHAT_TEXT = ("content",)


class AnswerSink(SseSink):
    """An SSE sink that also keeps the raw body, to read the answer from later."""

    __slots__ = ("raw",)

    def __init__(self, rec: RequestRecord, live: LiveCounters, chat: bool = False) -> None:
        super().__init__(rec, live, chat)
        self.raw = bytearray()

    def __call__(self, chunk: bytes, now: float) -> None:
        self.raw += chunk
        super().__call__(chunk, now)

    def answer(self) -> str:
        """The streamed text, in order (chat: the deltas' content; reasoning is not sent back)."""
        parts: list[str] = []
        body = bytes(self.raw).replace(b"\r\n", b"\n")
        for event in body.split(b"\n\n"):
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if not payload or payload == b"[DONE]":
                    continue
                try:
                    data = loads(payload, what="stream event")
                except ValueError:  # the sink has failed the record already
                    continue
                parts.append(_text_of(data, self.chat))
        return "".join(parts)


def _text_of(data: object, chat: bool) -> str:
    """One event's text: a completions choice's ``text``, a chat delta's ``content``."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if not chat:
        text = choice.get("text")
        return text if isinstance(text, str) else ""
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return ""
    return "".join(v for k in _CHAT_TEXT if isinstance(v := delta.get(k), str))
