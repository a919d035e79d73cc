"""``tunelab bench`` against misbehaving OpenAI-compatible servers (issues 19 and 26).

Each server (tests/support/bad_servers.py, loopback, every loop bounded)
breaks one rule; each case must end in a correct result or a one-line
error within its timeout — no traceback, no hang. Library-level cases call
``run_benchmark`` under ``asyncio.timeout``; the CLI cases check what a user
sees (exit code, one line, nothing Rich chokes on). Issue 26's classes
(odd status lines, chunk floods, absurd numbers, deep JSON, runs that must
stop early) are in test_bench_bad_servers.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from time import perf_counter

import pytest
from typer.testing import CliRunner

from tests.support.bad_servers import BadServer, bad_server
from tuner.bench import Workload, run_benchmark
from tuner.bench.errors import BenchError
from tuner.cli.app import app, register_all

WL = Workload(input_len=8, output_len=4, num_prompts=6, concurrency=3)


async def bench(srv: BadServer, wl: Workload = WL, limit_s: float = 20.0, **kw):
    async with asyncio.timeout(limit_s):
        return await run_benchmark(srv.url, None, wl, **kw)


def one_line(text: str) -> bool:
    """One line of message, optionally followed by one ``fix:`` line; never a traceback."""
    lines = text.strip().splitlines()
    fix_ok = len(lines) == 2 and lines[1].startswith("fix: ")
    return "Traceback" not in text and (len(lines) == 1 or fix_ok)


# ---- token sources ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "empty", "non_json", "list", "null", "nested"])
async def test_unusable_tokenize_is_a_one_line_error_naming_the_options(kind: str) -> None:
    with bad_server(tokenize=kind) as srv, pytest.raises(BenchError) as info:
        await bench(srv)
    msg = str(info.value)
    assert one_line(msg) and "--tokenizer" in msg and "--model" in msg, msg


async def test_model_argument_doubles_as_the_tokenizer(demo_model_path: Path) -> None:
    """With a local model dir as --model, /tokenize is never asked (as vllm bench serve)."""
    with bad_server(tokenize="missing") as srv:
        async with asyncio.timeout(20):
            res = await run_benchmark(srv.url, str(demo_model_path), WL)
    assert res.metrics["completed"] == 6
    assert res.prompt_source.endswith("tokenizer.json")
    assert "POST /tokenize" not in srv.requests


async def test_model_in_the_hf_cache_is_the_tokenizer(
    demo_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "tokenizer.json").write_bytes((demo_model_path / "tokenizer.json").read_bytes())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with bad_server(tokenize="missing") as srv:
        async with asyncio.timeout(20):
            res = await run_benchmark(srv.url, "acme/tiny", WL)
    assert res.metrics["completed"] == 6 and res.prompt_source == str(snap / "tokenizer.json")


async def test_bad_tokenizer_file_is_a_workload_error(tmp_path: Path) -> None:
    from tuner.bench.workload import WorkloadError

    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with bad_server() as srv, pytest.raises(WorkloadError, match="cannot load the tokenizer"):
        await bench(srv, tokenizer_path=str(bad))


@pytest.mark.parametrize("kind", ["list", "dict_data", "root_not_str", "non_json", "empty"])
async def test_odd_model_lists_are_handled(kind: str) -> None:
    with bad_server(models=kind) as srv:
        if kind == "root_not_str":  # usable id, junk root: the run goes on via /tokenize
            res = await bench(srv)
            assert res.metrics["completed"] == 6
            return
        with pytest.raises(BenchError) as info:
            await bench(srv)
    assert one_line(str(info.value)) and "--model" in str(info.value)


# ---- endpoints, usage, metrics -----------------------------------------------------


async def test_chat_only_server_with_the_chat_endpoint(demo_model_path: Path) -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=6, concurrency=3, endpoint="chat")
    with bad_server(chat_only=True) as srv:
        res = await bench(srv, wl, tokenizer_path=str(demo_model_path))
        assert res.metrics["completed"] == 6
        # The role chunk is no token: 4 content chunks, 3 gaps each (vllm counts content).
        assert all(len(r.chunk_times) == 4 for r in res.records)
        with pytest.raises(BenchError, match="--endpoint chat"):
            await bench(srv)  # completions against a chat-only server: says what to do


async def test_no_usage_counts_the_chunks() -> None:
    with bad_server(no_usage=True) as srv:
        res = await bench(srv)
    assert res.metrics["completed"] == 6 and res.metrics["total_output_tokens"] == 6 * 4


async def test_lying_usage_is_not_believed() -> None:
    with bad_server(usage_completion=10**15) as srv:
        res = await bench(srv)
    assert res.metrics["total_output_tokens"] == 6 * 4
    assert res.metrics["output_throughput"] < 1e6
    assert all("not believed" in r.usage_ignored or "counted the chunks" in r.usage_ignored
               for r in res.records)  # fmt: skip


@pytest.mark.parametrize("kind", ["missing", "bad_utf8", "bad_utf8_later", "huge"])
async def test_metrics_missing_broken_or_huge(kind: str) -> None:
    t0 = perf_counter()
    with bad_server(metrics=kind) as srv:
        res = await bench(srv, limit_s=40, metrics_interval_s=0.05)
    assert res.metrics["completed"] == 6
    if kind in ("missing", "huge"):
        assert not res.server.available
    else:
        assert res.server.available and res.server.samples >= 2
    assert perf_counter() - t0 < 30


# ---- streams that break ----------------------------------------------------------


async def test_500s_and_error_events_mid_run_are_counted() -> None:
    with bad_server(http_500_every=3, stream="error_event") as srv:
        res = await bench(srv)
    failures = res.to_dict()["tunelab"]["failures"]
    assert failures.get("HTTP 500", 0) >= 1 and failures.get("error event", 0) >= 1
    assert res.metrics["completed"] + res.metrics["failed"] == 6


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("never_ends", "chunk flood"),  # more token chunks than max_tokens: cut at once
        ("endless_comments", "too large"),
        ("endless_event", "bad event"),
        ("endless_headers", "bad response"),
        ("trickle", "stall"),
    ],
)
async def test_endless_or_trickling_answers_end_as_counted_failures(kind: str, reason: str) -> None:
    wl = Workload(input_len=8, output_len=4, num_prompts=2, concurrency=2, stall_timeout_s=1.0)
    t0 = perf_counter()
    with bad_server(stream=kind) as srv:
        res = await bench(srv, wl, limit_s=30)
    assert res.to_dict()["tunelab"]["failures"] == {reason: 2}
    assert perf_counter() - t0 < 20


async def test_trickle_is_cut_by_the_deadline_even_without_a_stall_timeout() -> None:
    wl = Workload(input_len=8, output_len=2, num_prompts=1, stall_timeout_s=None,
                  request_timeout_s=600)  # fmt: skip
    from tuner.bench import client

    old = client.DEADLINE_PER_TOKEN_S
    client.DEADLINE_PER_TOKEN_S = 0.5
    try:
        wl2 = Workload(**{**wl.to_dict(), "request_timeout_s": 1.5, "request_rate": float("inf")})
        with bad_server(stream="trickle") as srv:
            res = await bench(srv, wl2, limit_s=10)
    finally:
        client.DEADLINE_PER_TOKEN_S = old
    assert res.to_dict()["tunelab"]["failures"] == {"timeout": 1}
    assert client.request_deadline_s(128, 600, 120) == 120 + 128 * old  # derived, capped
    assert client.request_deadline_s(128, 30, 120) == 30


async def test_every_byte_its_own_write_still_measures_right() -> None:
    with bad_server(stream="every_byte") as srv:
        res = await bench(srv)
    assert res.metrics["completed"] == 6 and res.metrics["total_output_tokens"] == 24


# ---- what the user sees ------------------------------------------------------------

runner = CliRunner()
register_all(app)


def cli(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, ["bench", *args], catch_exceptions=False)
    return r.exit_code, r.output


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:99999", "http://127.0.0.1:abc", "ftp://x", "http://[::1"],
)
def test_bad_urls_are_one_line(url: str) -> None:
    code, out = cli("--url", url, "--num-prompts", "1")
    assert code == 2 and one_line(out) and "URL" in out, out


def test_ipv6_url_works() -> None:
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with BadServer(host="::1") as srv:
        assert srv.url.startswith("http://[::1]:")
        code, out = cli("--url", srv.url, "--num-prompts", "2", "--output-len", "4", "--json")
    assert code == 0, out
    assert json.loads(out)["completed"] == 2


def test_burstiness_inf_is_refused() -> None:
    code, out = cli("--url", "http://127.0.0.1:9", "--burstiness", "inf")
    assert code == 2 and "burstiness" in out and one_line(out)


def test_markup_and_escapes_in_server_text_do_not_break_the_table() -> None:
    with bad_server(model_id="[/]evil\x1b[2J", http_500_every=2) as srv:
        code, out = cli("--url", srv.url, "--num-prompts", "4", "--input-len", "8",
                        "--output-len", "4")  # fmt: skip
    assert code == 0, out
    assert "[/]evil" in out and "\x1b[2J" not in out and "\x1b[31m" not in out
    assert "failed: 2 × HTTP 500" in out and "[bold]boom[/]" in out


def test_no_metrics_says_not_available() -> None:
    with bad_server(metrics="missing") as srv:
        code, out = cli("--url", srv.url, "--num-prompts", "2", "--output-len", "4")
    assert code == 0 and "server metrics: not available" in out


def test_output_directory_refused_before_the_run(tmp_path: Path) -> None:
    with bad_server() as srv:
        code, out = cli("--url", srv.url, "--num-prompts", "2", "--output", str(tmp_path))
        assert code == 2 and "is a directory" in out
        assert not any(r.startswith("POST /v1") for r in srv.requests)  # nothing was run


def test_output_never_follows_a_planted_tmp_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out_file = tmp_path / "res.json"
    os.symlink(victim, tmp_path / "res.json.tmp")
    with bad_server() as srv:
        code, _ = cli("--url", srv.url, "--num-prompts", "2", "--output", str(out_file))
    assert code == 0
    assert victim.read_text() == "keep me"
    assert json.loads(out_file.read_text())["completed"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res.json", "res.json.tmp", "victim.txt"]


# ---- secrets -------------------------------------------------------------------------

CANARY = "CanaryPw7731"


def _files_with(root: Path, needle: bytes) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            hits.append(str(path))
    return hits


def test_url_password_and_api_key_never_reach_what_tunelab_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A canary password in the URL and a canary key in an env var: used, never written."""
    home = tmp_path / "home"
    monkeypatch.setenv("TUNELAB_HOME", str(home))
    monkeypatch.setenv("BENCH_KEY", CANARY + "key")
    monkeypatch.chdir(tmp_path)
    out_file = tmp_path / "out" / "res.json"
    with bad_server() as srv:
        url = srv.url.replace("http://", f"http://alice:{CANARY}@") + "/?api_key=" + CANARY
        code, out = cli("--url", url, "--num-prompts", "2", "--output-len", "4",
                        "--output", str(out_file), "--json", "--detailed")  # fmt: skip
        assert code == 0, out
        code2, out2 = cli("--url", srv.url, "--num-prompts", "1", "--output-len", "4",
                          "--api-key-env", "BENCH_KEY")  # fmt: skip
        assert code2 == 0, out2
    # The credentials were used, as headers ...
    import base64

    basic = "Basic " + base64.b64encode(f"alice:{CANARY}".encode()).decode()
    assert basic in srv.auth and f"Bearer {CANARY}key" in srv.auth
    # ... and are nowhere in what tunelab printed or wrote.
    assert CANARY not in out and CANARY not in out2
    assert json.loads(out_file.read_text())["tunelab"]["url"] == srv.url
    assert _files_with(tmp_path, CANARY.encode()) == []
    code3, out3 = cli("--url", f"http://bob:{CANARY}@127.0.0.1:99999", "--num-prompts", "1")
    assert code3 == 2 and CANARY not in out3 and "***" in out3
