"""The live tokens/s counts tokens, as the result does (issue 32: it counted chunks).

vLLM may put several tokens in one streamed chunk (its stream interval,
speculative decoding); the CPU engine's live figure read 537 "tok/s" beside a
result of 1,074. The live count now takes a chunk as one token while a request
streams and settles to the request's counted tokens (its usage report) when it
ends, so over a run the live total equals the result's output tokens.
"""

from __future__ import annotations

import json

import pytest

from tuner.bench.progress import ProgressReporter
from tuner.bench.record import LiveCounters, RequestRecord
from tuner.bench.sse import SseSink, finish_record


def _event(data: dict[str, object]) -> bytes:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _token(text: str) -> bytes:
    return _event(
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "choices": [{"index": 0, "text": text, "finish_reason": None}],
            "usage": None,
        }
    )


def _usage(tokens: int) -> bytes:
    return _event(
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "choices": [],
            "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": 8 + tokens},
        }
    )


@pytest.mark.parametrize(
    ("chunks", "usage", "tokens"),
    [(3, 6, 6), (3, None, 3), (4, 4, 4)],
    ids=["two tokens a chunk", "no usage: a chunk each", "one token a chunk"],
)
def test_the_live_count_settles_to_the_requests_tokens(
    chunks: int, usage: int | None, tokens: int
) -> None:
    live = LiveCounters()
    rec = RequestRecord(prompt_len=8, expected_output_len=16)
    sink = SseSink(rec, live)
    for i in range(chunks):
        sink(_token(" ab"), float(i))
        assert live.tokens == i + 1  # while it streams: a chunk is a token
    sink((_usage(usage) if usage is not None else b"") + b"data: [DONE]\n\n", float(chunks))
    finish_record(rec, sink)
    assert rec.output_tokens == tokens
    assert (live.chunks, live.tokens) == (chunks, tokens)


def test_the_reporters_rate_is_over_tokens() -> None:
    live = LiveCounters()
    reporter = ProgressReporter(None, live, total=1)
    reporter.start()
    rec = RequestRecord(prompt_len=8, expected_output_len=16)
    sink = SseSink(rec, live)
    sink(_token(" ab") + _token(" cd") + _usage(8) + b"data: [DONE]\n\n", 0.0)
    finish_record(rec, sink)
    snap = reporter.snapshot()
    # 8 tokens (2 chunks) since start: the rate's numerator is the tokens.
    assert snap.tokens_per_s * snap.elapsed_s == pytest.approx(8, rel=0.05)
