"""``tunelab bench`` against servers that break HTTP itself, flood chunks, or never end (issue 26).

The classes issue 26's red team found after issue 19's: odd status lines and
non-HTTP servers, chunk floods, absurd usage numbers, deeply nested JSON, and
runs that must stop early (a deadline, repeated failures) — checked by the
reason and the request counts, never by timing. The servers are
tests/support/bad_servers.py's; the shared helpers are test_bench_hostile's.
"""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bad_servers import ODD_REPLIES, bad_server
from tests.test_bench_hostile import WL, bench, cli, one_line
from tuner.bench import Workload, run_benchmark
from tuner.bench.errors import BenchError
from tuner.bench.metrics import compute_metrics
from tuner.bench.prompts import Prompt
from tuner.bench.record import RequestRecord
from tuner.bench.run_limits import BenchStopped, GuardOptionError, run_deadline_s

# ---- issue 26: odd status lines and servers that do not speak HTTP/1.1 -------------------


def client_tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log records with a traceback through tunelab's code (asyncio's "data_received() failed")."""
    found = []
    for r in caplog.records:
        text = r.getMessage()
        if r.exc_info:
            text += logging.Formatter().formatException(r.exc_info)
        if "tuner/" in text or "data_received" in text:
            found.append(text)
    return found


ODD = {
    # reply -> (failure kind, words its reason must hold)
    "switching_101": ("bad response", "101 Switching Protocols"),
    "switching_101_bare": ("bad response", "101 Switching Protocols"),
    "continue_100_only": ("disconnected", "interim 1xx"),
    "early_hints_103_only": ("disconnected", "interim 1xx"),
    "endless_100": ("bad response", "head over"),
    "no_content_204_with_body": ("bad response", "after its complete HTTP 204"),
    "not_modified_304_with_body": ("bad response", "after its complete HTTP 304"),
    "no_status_line": ("bad response", "does not start with an HTTP status line"),
    "http09": ("bad response", "does not start with an HTTP status line"),
    "status_999": ("HTTP 999", "no"),
    "status_text": ("bad response", "malformed HTTP"),
    "http_3_0": ("bad response", "malformed HTTP"),
    "binary": ("bad response", "does not start with an HTTP status line"),
    "json_not_stream": ("no tokens", "plain JSON, not an event stream"),
    "tls_alert": ("bad response", "use an https:// URL"),
    "http2_frames": ("bad response", "HTTP/2 only"),
    "bare_close": ("disconnected", "before any answer"),
}


def test_every_odd_reply_has_an_expected_outcome() -> None:
    assert set(ODD) == set(ODD_REPLIES)


@pytest.mark.parametrize("reply", sorted(ODD))
async def test_odd_status_lines_are_failed_requests_with_a_reason(
    reply: str, caplog: pytest.LogCaptureFixture
) -> None:
    kind, words = ODD[reply]
    with bad_server(reply=reply) as srv:
        res = await bench(srv)
    failures = res.failures
    assert failures.counts == {kind: 6}, failures.counts
    assert words in failures.examples[kind], failures.examples[kind]
    assert client_tracebacks(caplog) == []


async def test_a_bug_in_the_body_sink_reaches_the_request_not_asyncio(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only server faults become failed requests; an exception of ours is raised to the caller."""
    from tuner.bench.http import _Conn, _Response

    def sink(data: bytes, now: float) -> None:
        raise RuntimeError("a bug")

    resp, conn = _Response(sink, lambda now: None, 1 << 20), _Conn()
    conn.response = resp
    conn.data_received(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi")
    assert isinstance(resp.done.exception(), RuntimeError) and conn.closed
    assert client_tracebacks(caplog) == []


async def test_interim_answers_before_the_real_one_are_skipped() -> None:
    """100 Continue and 103 Early Hints before the 200 are legal (RFC 9110 15.2)."""
    with bad_server(interim=True) as srv:
        res = await bench(srv)
    assert res.completed == 6 and res.total_output_tokens == 24


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        ("switching_101", "Switching"),
        ("tls_alert", "https://"),
        ("http2_frames", "HTTP/2"),
        ("no_status_line", "status line"),
        ("bare_close", "disconnected"),
    ],
)
async def test_odd_answers_to_control_calls_are_one_line_errors(reply: str, words: str) -> None:
    with bad_server(control_reply=reply) as srv, pytest.raises(BenchError) as info:
        await bench(srv)
    msg = str(info.value)
    assert one_line(msg) and words in msg and "/v1/models" in msg, msg


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real ``tunelab bench`` in a subprocess: what a user's terminal shows."""
    cmd = [sys.executable, "-m", "tui.cli", "bench", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_cli_on_a_101_server_exits_1_naming_it_without_a_traceback() -> None:
    with bad_server(reply="switching_101") as srv:
        r = run_cli("--url", srv.url, "--num-prompts", "3", "--input-len", "8",
                    "--output-len", "4")  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "crash" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tunelab bench: every request failed: 3 x bad response:"), last
    assert "101 Switching Protocols" in last


def test_cli_on_a_tls_server_exits_naming_https_without_a_traceback() -> None:
    with bad_server(protocol="tls") as srv:
        r = run_cli("--url", srv.url, "--num-prompts", "2")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "crash" not in r.stderr
    assert one_line(r.stderr) and "https://" in r.stderr, r.stderr


@pytest.mark.parametrize("protocol", ["tls", "h2", "close"])
async def test_servers_that_are_no_http_server_are_one_line_errors(protocol: str) -> None:
    with bad_server(protocol=protocol) as srv, pytest.raises(BenchError) as info:
        await bench(srv)
    assert one_line(str(info.value)) and "/v1/models" in str(info.value)


# ---- issue 26: chunk floods are no tokens --------------------------------------------------

FLOODS = ["flood_empty", "flood_blank", "flood_newline", "flood_comments", "flood_null",
          "flood_no_text"]  # fmt: skip


@pytest.mark.parametrize("no_usage", [False, True], ids=["usage", "no-usage"])
@pytest.mark.parametrize("kind", FLOODS)
async def test_chunk_floods_count_only_the_real_tokens(kind: str, no_usage: bool) -> None:
    """300 chunks without content after each of 4 tokens: 4 tokens, 4 timed chunks, flagged."""
    with bad_server(stream=kind, no_usage=no_usage) as srv:
        res = await bench(srv)
    assert res.completed == 6 and res.failed == 0
    assert res.total_output_tokens == 6 * 4
    assert all(len(r.chunk_times) == 4 and len(r.itls) == 3 for r in res.records)
    assert sum(res.flags.counts.values()) == 6, res.flags.counts
    assert res.to_dict()["tunelab"]["chunks_per_output_token"] == 1.0


@pytest.mark.parametrize("no_usage", [False, True], ids=["usage", "no-usage"])
async def test_the_same_chunk_repeated_is_a_flood_not_tokens(no_usage: bool) -> None:
    with bad_server(stream="flood_repeat", no_usage=no_usage) as srv:
        res = await bench(srv)
    assert res.failures.counts == {"chunk flood": 6}
    assert res.total_output_tokens == 0 and res.metrics["output_throughput"] == 0.0
    assert "max_tokens 4" in res.failures.examples["chunk flood"]


async def test_usage_that_matches_a_flood_is_not_believed() -> None:
    """1200 whitespace chunks and usage 1204: max_tokens was 4, so neither is believed."""
    with bad_server(stream="flood_blank", usage_completion=4 + 4 * 300) as srv:
        res = await bench(srv)
    assert res.completed == 6 and res.total_output_tokens == 24
    assert res.flags.counts == {"usage ignored": 6, "whitespace chunks": 6}
    assert "1204 completion tokens for max_tokens 4" in res.flags.examples["usage ignored"]


@pytest.mark.parametrize("kind", ["flood_role", "flood_empty", "flood_blank"])
async def test_chat_floods_count_only_the_content(kind: str, demo_model_path: Path) -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=6, concurrency=3, endpoint="chat")
    with bad_server(stream=kind) as srv:
        res = await bench(srv, wl, tokenizer_path=str(demo_model_path))
    assert res.completed == 6 and res.total_output_tokens == 24
    assert all(len(r.chunk_times) == 4 for r in res.records)


# ---- issue 26: absurd numbers and deeply nested JSON ---------------------------------------


@pytest.mark.parametrize(
    "value", [1e308, -5, float("nan"), float("inf"), "12", True, 10**400, {"n": 4}, 10**9],
    ids=["1e308", "negative", "nan", "inf", "string", "bool", "10^400", "object", "over-max"],
)  # fmt: skip
async def test_absurd_usage_is_not_believed_and_never_poisons_the_result(value: object) -> None:
    with bad_server(usage_completion=value, usage_prompt=value) as srv:
        res = await bench(srv)
    assert res.completed == 6 and res.total_output_tokens == 24
    assert res.metrics["total_input_tokens"] == 6 * 8  # the prompts' own lengths
    assert res.flags.counts == {"usage ignored": 6}
    assert "not believed" in res.flags.examples["usage ignored"]
    json.dumps(res.to_dict(detailed=True), allow_nan=False)  # no NaN, no infinity
    assert all(math.isfinite(v) for v in res.metrics.values() if isinstance(v, float))


def test_a_zero_duration_gives_zero_throughput_not_nan() -> None:
    rec = RequestRecord(8, 4, start=1.0, chunk_times=[1.1, 1.2], output_tokens=2)
    m = compute_metrics([rec], 0.0)
    assert m["output_throughput"] == 0.0 and m["request_throughput"] == 0.0
    json.dumps(m, allow_nan=False)


@pytest.mark.parametrize("kind", ["deep_event", "deep_error_event", "deep_usage"])
async def test_deeply_nested_stream_events_are_failed_requests(kind: str) -> None:
    with bad_server(stream=kind) as srv:
        res = await bench(srv)
    assert res.failures.counts == {"bad event": 6}
    assert "64 levels" in res.failures.examples["bad event"]


async def test_a_deeply_nested_error_body_is_a_failed_request() -> None:
    with bad_server(error_body="deep") as srv:
        res = await bench(srv)
    assert res.failures.counts == {"HTTP 500": 6}
    assert "nested too deeply" in res.failures.examples["HTTP 500"]


@pytest.mark.parametrize("where", ["models", "tokenize"])
async def test_deeply_nested_control_answers_are_one_line_errors(where: str) -> None:
    with bad_server(**{where: "deep"}) as srv, pytest.raises(BenchError) as info:
        await bench(srv)
    assert one_line(str(info.value)) and "nested too deeply" in str(info.value)


# ---- issue 26: runs that end early ---------------------------------------------------------


async def test_keep_alive_comments_are_no_progress_for_the_stall_watchdog() -> None:
    """Complete events that carry nothing must not keep a request alive (cut as "stall")."""
    wl = Workload(input_len=8, output_len=4, num_prompts=2, concurrency=2, stall_timeout_s=1.0)
    with bad_server(stream="comment_trickle") as srv:
        res = await bench(srv, wl)
    assert res.failures.counts == {"stall": 2}


async def test_repeated_failures_stop_the_run_with_the_reason() -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=200, concurrency=2)
    with bad_server(fail_all=503) as srv, pytest.raises(BenchStopped) as info:
        await bench(srv, wl)
    assert str(info.value) == "stopped after 20 consecutive failed requests: HTTP 503: overloaded"
    assert info.value.exit_code == 1
    assert 20 <= srv.streams <= 22  # the 2 in flight when it stopped, not 200


async def test_warmups_that_all_fail_stop_the_run_before_it_is_measured() -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=5, warmup_requests=50, concurrency=1)
    with bad_server(fail_all=500) as srv, pytest.raises(BenchStopped, match="5 consecutive"):
        await bench(srv, wl, max_consecutive_failures=5)
    assert srv.streams == 5


async def test_a_mostly_failing_server_stops_on_the_failed_fraction() -> None:
    """4 of 5 fail: never 20 in a row, but more than 75 % of the first 40 failed."""
    wl = Workload(input_len=8, output_len=4, num_prompts=200, concurrency=1)
    with bad_server(succeed_every=5) as srv, pytest.raises(BenchStopped) as info:
        await bench(srv, wl)
    assert str(info.value).startswith("stopped after 32 of 40 requests failed (more than 75%)")
    assert srv.streams == 40


async def test_the_run_deadline_stops_a_server_that_trickles_forever() -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=3, concurrency=3, stall_timeout_s=None)
    with bad_server(stream="comment_trickle") as srv, pytest.raises(BenchStopped) as info:
        await bench(srv, wl, deadline_s=1.0)
    msg = str(info.value)
    assert msg.startswith("stopped at the run's deadline of 1 s (as set): 0 requests had ended")
    assert srv.streams == 3


async def test_the_derived_deadline_applies_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tuner.bench import runner

    monkeypatch.setattr(runner, "run_deadline_s", lambda *a: 0.5)
    wl = Workload(input_len=8, output_len=4, num_prompts=3, concurrency=3, stall_timeout_s=None)
    with bad_server(stream="comment_trickle") as srv, pytest.raises(BenchStopped) as info:
        await bench(srv, wl)
    assert "(derived from the workload)" in str(info.value)


def test_the_derived_deadline_is_every_request_using_its_own_deadline() -> None:
    """(stall + 1 s per token) per wave of `concurrency`, plus the schedule and a setup slack."""
    wl = Workload(output_len=100, num_prompts=10, concurrency=2, stall_timeout_s=120)
    prompts = [Prompt(prompt=[1], prompt_len=1, output_len=100)] * 10
    warm = [Prompt(prompt=[1], prompt_len=1, output_len=100)] * 3
    # 120 setup + 2 warm-up waves x 220 s + 7 s of arrivals + 5 waves x 220 s
    assert run_deadline_s(wl, prompts, warm, 7.0) == 120 + 2 * 220 + 7 + 5 * 220
    capped = Workload(output_len=100, num_prompts=10, request_timeout_s=60)
    assert run_deadline_s(capped, prompts, [], 0.0) == 120 + 60  # no cap: one wave
    closed = Workload(output_len=100, concurrency=4, duration_s=30, stall_timeout_s=10)
    assert run_deadline_s(closed, prompts, [], 0.0) == 120 + 30 + 110  # the last 4 in flight


@pytest.mark.parametrize(
    ("kw", "words"),
    [({"deadline_s": 0.0}, "deadline"), ({"deadline_s": float("nan")}, "deadline"),
     ({"max_consecutive_failures": 0}, "failure limit")],
)  # fmt: skip
async def test_unusable_guard_options_are_refused(kw: dict, words: str) -> None:
    with pytest.raises(GuardOptionError, match=words):
        await run_benchmark("http://127.0.0.1:9", "m", WL, **kw)


def test_cli_stops_after_repeated_failures_and_says_why() -> None:
    with bad_server(fail_all=503) as srv:
        code, out = cli("--url", srv.url, "--num-prompts", "50", "--concurrency", "1",
                        "--input-len", "8", "--output-len", "4", "--max-failures", "5")  # fmt: skip
    assert code == 1, out
    assert "tunelab bench: stopped after 5 consecutive failed requests: HTTP 503: overloaded" in out
    assert "Traceback" not in out and srv.streams == 5


def test_cli_refuses_an_unusable_deadline() -> None:
    code, out = cli("--url", "http://127.0.0.1:9", "--deadline", "-1")
    assert code == 2 and one_line(out) and "deadline" in out, out
