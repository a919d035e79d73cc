"""The steady window of a closed-loop run (issue 30): from full load to the start of the drain.

Records are built by hand here (times in seconds), so the window's edges and its token count
are known exactly: the C-th send opens it, the last send closes it, and only the token chunks
inside it count.
"""

from __future__ import annotations

import math

import pytest

from tuner.bench.record import RequestRecord
from tuner.bench.steady import no_window_reason, steady_window
from tuner.bench.workload import Workload


def rec(start: float, tokens: int, gap: float = 0.1, ttft: float = 0.2) -> RequestRecord:
    r = RequestRecord(prompt_len=10, expected_output_len=tokens)
    r.start = r.arrival = start
    r.chunk_times = [start + ttft + k * gap for k in range(tokens)]
    r.end = r.chunk_times[-1]
    r.output_tokens = tokens
    return r


def test_the_window_runs_from_the_cth_send_to_the_last_send() -> None:
    # Concurrency 2: requests 0 and 1 at t=0 and t=0.5, then each replaced as one ends.
    records = [rec(0.0, 10), rec(0.5, 10), rec(1.2, 10), rec(1.7, 10), rec(2.4, 10)]
    win = steady_window(records, 2)
    assert win is not None
    assert (win.start_s, win.end_s) == (0.5, 2.4)
    inside = sum(1 for r in records for t in r.chunk_times if 0.5 <= t <= 2.4)
    assert win.output_tokens == inside
    assert win.output_throughput == pytest.approx(inside / 1.9)
    assert win.requests == 4  # sent at 0.5, 1.2, 1.7, 2.4
    assert win.median_ttft_ms == pytest.approx(200.0)
    assert win.to_dict()["duration_s"] == pytest.approx(1.9)


def test_one_wave_has_no_window_and_says_why() -> None:
    assert steady_window([rec(0.0, 5), rec(0.0, 5)], 2) is None
    closed = Workload(num_prompts=8, concurrency=8)
    assert "one wave" in (no_window_reason(closed, 8) or "")
    assert "at once" in (no_window_reason(Workload(num_prompts=8), 8) or "")
    assert "open-loop" in (no_window_reason(Workload(request_rate=4.0), 8) or "")
    assert no_window_reason(Workload(num_prompts=32, concurrency=8), 32) is None
    assert math.isinf(Workload().request_rate)


def test_a_failed_request_held_its_slot_but_brought_no_token() -> None:
    failed = RequestRecord(prompt_len=1, expected_output_len=10)
    failed.start = failed.arrival = 0.4
    failed.end = 0.45
    failed.fail("HTTP 500", "boom")
    records = [rec(0.0, 10), failed, rec(1.0, 10)]
    win = steady_window(records, 2)
    assert win is not None and (win.start_s, win.end_s) == (0.4, 1.0)
    assert win.requests == 1  # the one answered request sent inside it (at 1.0)
    # the request sent at 1.0 has its first token at 1.2, after the window
    assert win.output_tokens == sum(1 for t in records[0].chunk_times if 0.4 <= t <= 1.0)
