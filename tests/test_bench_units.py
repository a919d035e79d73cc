"""Unit checks of the bench building blocks: workload validation, SLOs, statistics, parsing."""

from __future__ import annotations

import itertools
import json
import math
import random
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.support.openai_stub import StubProcess
from tuner.bench.client import RequestRecord
from tuner.bench.metrics import (
    compute_metrics,
    delivery_warning,
    describe_ms,
    is_good,
    one_chunk_fraction,
    percentile,
)
from tuner.bench.prompts import pool_from_tokenizer, random_prompts, sharegpt_prompts
from tuner.bench.runner import arrival_offsets
from tuner.bench.server_metrics import parse_prometheus, sample_from_text, summarize
from tuner.bench.workload import Workload, WorkloadError, parse_slo


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"input_len": 0}, "input_len must be >= 1"),
        ({"output_len": -3}, "output_len must be >= 1"),
        ({"num_prompts": 0}, "num_prompts"),
        ({"range_ratio": 1.0}, "range_ratio"),
        ({"concurrency": 0}, "concurrency must be >= 1"),
        ({"request_rate": 0}, "request_rate must be > 0"),
        ({"burstiness": 0}, "burstiness"),
        ({"endpoint": "embeddings"}, "endpoint must be"),
        ({"slo": {"latency": 5}}, "unknown SLO key"),
        ({"duration_s": 0}, "duration_s"),
    ],
)
def test_bad_workloads_say_what_is_wrong(kwargs: dict, needle: str) -> None:
    with pytest.raises(WorkloadError, match=needle):
        Workload(**kwargs)


def test_workload_round_trips_through_json() -> None:
    wl = Workload(input_len=7, request_rate=math.inf, slo={"ttft": 500.0}, concurrency=3)
    back = Workload.from_dict(json.loads(json.dumps(wl.to_dict())))
    assert back == wl
    with pytest.raises(WorkloadError, match="unknown workload field"):
        Workload.from_dict({"input_lenn": 3})


def test_parse_slo() -> None:
    assert parse_slo("ttft:500, itl:50") == {"ttft": 500.0, "itl": 50.0}
    assert parse_slo("TPOT:20,e2el:3000") == {"tpot": 20.0, "e2el": 3000.0}
    for bad, needle in (
        ("ttft=5", "no ':'"),
        ("foo:5", "unknown SLO key"),
        ("ttft:x", "not a number"),
        ("ttft:0", "> 0"),
    ):
        with pytest.raises(WorkloadError, match=needle):
            parse_slo(bad)


def test_percentiles_and_stats_match_numpy() -> None:
    rng = random.Random(5)
    for n in (1, 2, 7, 100, 1001):
        xs = [rng.expovariate(10) for _ in range(n)]
        for p in (0, 25, 50, 90, 95, 99, 99.9, 100):
            assert percentile(xs, p) == pytest.approx(
                float(np.percentile(xs, p)), rel=1e-12, abs=1e-15
            )
        d = describe_ms("ttft", xs)
        assert d["mean_ttft_ms"] == pytest.approx(np.mean(xs) * 1000)
        assert d["std_ttft_ms"] == pytest.approx(np.std(xs) * 1000, abs=1e-9)
        assert d["median_ttft_ms"] == pytest.approx(np.median(xs) * 1000)
    assert percentile([], 50) == 0.0


def _rec(start: float, times: list[float], out: int, error: str = "") -> RequestRecord:
    r = RequestRecord(
        prompt_len=10, expected_output_len=out, start=start, chunk_times=times, output_tokens=out
    )
    r.error_kind = error
    return r


def test_metrics_formulas_on_hand_made_records() -> None:
    a = _rec(0.0, [0.1, 0.15, 0.2, 0.25], 4)  # ttft 100, itl 50, tpot 50, e2el 250
    b = _rec(0.0, [0.3, 0.32], 2)  # ttft 300, itl 20, tpot 20, e2el 320
    c = _rec(0.0, [], 3, error="HTTP 500")
    m = compute_metrics([a, b, c], duration_s=2.0, slo={"ttft": 200})
    assert (m["completed"], m["failed"]) == (2, 1)
    assert m["total_input_tokens"] == 20 and m["total_output_tokens"] == 6
    assert m["request_throughput"] == 1.0 and m["output_throughput"] == 3.0
    assert m["total_token_throughput"] == 13.0
    assert m["request_goodput"] == 0.5  # only a meets ttft <= 200 ms
    assert m["mean_ttft_ms"] == pytest.approx(200.0)
    assert m["mean_tpot_ms"] == pytest.approx(35.0)
    assert m["median_itl_ms"] == pytest.approx(50.0)  # pooled [50, 50, 50, 20]
    assert m["mean_e2el_ms"] == pytest.approx(285.0)
    assert m["max_output_tokens_per_s"] == 6.0 and m["max_concurrent_requests"] == 2
    assert is_good(a, {"itl": 50.5}) and not is_good(a, {"itl": 49.0})
    assert is_good(b, {"tpot": 21}) and not is_good(b, {"e2el": 300})


PROM = """\
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 1.0
vllm:num_preemptions_total{engine="0",model_name="m{x}"} 7.0
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 40.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 12.0
process_open_fds 33 1712345678000
"""


def test_prometheus_parser_and_summary() -> None:
    m = parse_prometheus(PROM)
    assert m["vllm:kv_cache_usage_perc"] == [0.25, 0.5]
    assert m["vllm:num_preemptions_total"] == [7.0]
    assert m["process_open_fds"] == [33.0]
    s0 = sample_from_text(PROM, 0.0)
    assert (s0.kv_usage, s0.waiting, s0.preemptions) == (0.5, 4.0, 7.0)
    s1 = sample_from_text(
        PROM.replace("} 7.0", "} 9.0")
        .replace("} 0.5", "} 0.95")
        .replace("} 40.0", "} 70.0")
        .replace("} 100.0", "} 150.0"),
        1.0,
        in_flight=4,  # taken while requests were open: its gauges count as peaks
    )
    summ = summarize([s0, s1])
    assert summ.preemptions == 2 and summ.preempting
    assert summ.kv_bound and summ.peak_kv_cache_usage == 0.95
    assert summ.prefix_cache_hit_rate == pytest.approx(30 / 50)
    assert not summarize([]).available
    # Only idle scrapes (before/after the load): peaks are unknown, not 0.
    idle = summarize([s0, sample_from_text(PROM, 2.0)])
    assert idle.available and idle.busy_samples == 0
    assert idle.peak_running_requests is None and idle.peak_kv_cache_usage is None


def test_the_engine_s_own_inter_token_latency_is_the_histogram_s_delta() -> None:
    # Two engines' histograms summed; the run's mean is (sum delta) / (count delta), so gaps
    # from before the run (the "before" scrape's totals) do not count.
    page = """\
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 1.5
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 1000.0
vllm:inter_token_latency_seconds_sum{engine="1",model_name="m"} 0.5
vllm:inter_token_latency_seconds_count{engine="1",model_name="m"} 500.0
"""
    before = sample_from_text(page, 0.0)
    after = sample_from_text(
        page.replace("} 1.5", "} 3.5").replace("} 1000.0", "} 1800.0"), 1.0, in_flight=2
    )
    assert (before.itl_sum, before.itl_count) == (2.0, 1500.0)
    assert summarize([before, after]).mean_itl_ms == pytest.approx(2.0 / 800 * 1e3)
    assert summarize([before, before]).mean_itl_ms is None  # no gap during the run
    assert summarize([sample_from_text(PROM, 0.0)] * 2).mean_itl_ms is None  # no histogram


def test_arrivals_are_seeded_and_rescaled_like_vllm() -> None:
    wl = Workload(num_prompts=50, request_rate=10.0, seed=4)
    a = arrival_offsets(wl, 50)
    assert a == arrival_offsets(wl, 50)
    assert a[-1] == pytest.approx(5.0)  # last arrival at n / rate exactly
    assert all(x <= y for x, y in itertools.pairwise(a))
    assert arrival_offsets(Workload(), 5) == [0.0] * 5


def test_prompts_exact_lengths_and_dataset_errors(demo_model_path, tmp_path) -> None:
    pool = pool_from_tokenizer(demo_model_path)
    ps = random_prompts(Workload(input_len=50, output_len=9, range_ratio=0.2, seed=2), pool, 40)
    assert all(40 <= p.prompt_len <= 60 and len(p.prompt) == p.prompt_len for p in ps)
    assert {p.output_len for p in ps} <= set(range(7, 12))
    assert all(0 <= t < 512 for p in ps for t in p.prompt)
    with pytest.raises(WorkloadError, match=r"no tokenizer\.json"):
        pool_from_tokenizer(tmp_path)
    missing = Workload(dataset_path=str(tmp_path / "nope.json"))
    with pytest.raises(WorkloadError, match="does not exist"):
        sharegpt_prompts(missing, 3)
    (tmp_path / "bad.json").write_text('{"a": 1}')
    with pytest.raises(WorkloadError, match="JSON list"):
        sharegpt_prompts(Workload(dataset_path=str(tmp_path / "bad.json")), 3)


def test_cli_bench_prints_vllm_compatible_json_and_rejects_bad_input(tmp_path) -> None:
    from tuner.cli.app import app, register_all

    register_all(app)
    runner = CliRunner()
    with StubProcess({"ttft_ms": 20, "itl_ms": 5}) as stub:
        out = tmp_path / "res.json"
        r = runner.invoke(app, ["bench", "--url", stub.url, "--input-len", "16", "--output-len", "4",
                                "--num-prompts", "6", "--concurrency", "2", "--slo", "ttft:500,itl:50",
                                "--json", "--output", str(out)])  # fmt: skip
        assert r.exit_code == 0, r.output
        data = json.loads(r.stdout)
        assert data == json.loads(out.read_text())
        assert data["model_id"] == "stub-model" and data["completed"] == 6
        for key in (
            "mean_ttft_ms",
            "p99_itl_ms",
            "median_tpot_ms",
            "output_throughput",
            "request_goodput",
        ):
            assert key in data
        assert data["request_goodput"] == pytest.approx(data["request_throughput"])
        assert data["tunelab"]["one_chunk_fraction"] == 0.0  # 5 ms gaps: streamed
        r = runner.invoke(app, ["bench", "--url", stub.url, "--concurrency", "0"])
        assert r.exit_code == 2 and "concurrency must be >= 1" in r.output
        r = runner.invoke(app, ["bench", "--url", stub.url, "--slo", "ttft"])
        assert r.exit_code == 2 and "KEY:MS" in r.output
    r = runner.invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--num-prompts", "1"])
    assert r.exit_code == 2 and "cannot reach" in r.output


def test_one_chunk_fraction_counts_multi_token_responses_read_at_once() -> None:
    streamed = _rec(0.0, [0.1, 0.15, 0.2, 0.25], 4)
    bunched = _rec(0.0, [0.3, 0.30001, 0.30002], 3)  # three chunks within 20 us: one read
    single = _rec(0.0, [0.4], 8)  # eight tokens in one chunk
    one_token = _rec(0.0, [0.2], 1)  # nothing to bunch: left out
    failed = _rec(0.0, [], 3, error="HTTP 500")
    assert one_chunk_fraction([streamed, bunched, single, one_token, failed]) == pytest.approx(
        2 / 3
    )
    assert one_chunk_fraction([one_token, failed]) == 0.0


def test_delivery_warning_only_from_half_one_piece() -> None:
    assert delivery_warning({"tunelab": {"one_chunk_fraction": 0.49}}) is None
    assert delivery_warning({"tunelab": {}}) is None
    assert delivery_warning({}) is None  # a result from another client
    text = delivery_warning({"tunelab": {"one_chunk_fraction": 0.5}})
    assert text is not None and text.startswith("50% of the responses arrived in one piece")
    assert "E2E latency and throughput still hold" in text


def test_cli_bench_says_when_responses_arrive_in_one_piece() -> None:
    from tuner.cli.app import app, register_all

    register_all(app)
    runner = CliRunner()
    # Zero delays and a burst larger than the output: each response is one write.
    with StubProcess({"ttft_ms": 0, "itl_ms": 0, "burst": 64}) as stub:
        args = ["bench", "--url", stub.url, "--input-len", "16", "--output-len", "8"]
        args += ["--num-prompts", "4", "--concurrency", "1"]
        r = runner.invoke(app, [*args, "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["tunelab"]["one_chunk_fraction"] == 1.0
        r = runner.invoke(app, args, env={"COLUMNS": "300"})
        assert r.exit_code == 0, r.output
        assert "100% of the responses arrived in one piece" in " ".join(r.stdout.split())


def test_commands_that_send_no_request_load_no_http_stack() -> None:
    """`tunelab` loads a command's module only when it runs (tuner.cli.app.LazyCommands).

    So `knobs`, `check` or `ab` start without the benchmark's HTTP stack, while
    `bench` loads it: the check is on what each command costs, not on --help.
    """
    import subprocess

    heavy = ("aiohttp", "httpx", "httptools", "numpy", "vllm", "torch")
    code = (
        "import sys\n"
        "from typer.main import get_command\n"
        "from tui.cli import app\n"
        "get_command(app).get_command(None, sys.argv[1])\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )

    def loaded(command: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", code, command], capture_output=True, text=True, check=True
        ).stdout.strip()

    for command in ("knobs", "check", "doctor", "gpus", "ab", "tune", "capacity", "report"):
        assert loaded(command) == "[]", command
    assert "httptools" in loaded("bench")  # its own stack, loaded when it runs
