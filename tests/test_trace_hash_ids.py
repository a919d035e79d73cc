"""Trace replay that keeps prefix reuse (issue 30, first bullet): Mooncake traces.

A Mooncake record (``timestamp`` in ms, ``input_length``, ``output_length``,
``hash_ids``: one id per 512-token block) becomes a prompt whose token blocks
are identical exactly where the ids are (tuner.bench.trace). Checked here:
both formats parse, bad lines are named, block identity, the trace's
block-reuse ratio on hand-made traces, --time-scale, the figure in the result
and on the CLI (programmable stub), and on the real CPU engine that the
engine's prefix-cache hit rate follows the trace's reuse while random content
of the same lengths gets none.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.openai_stub import StubProcess
from tuner.bench import Workload, WorkloadError, run_benchmark
from tuner.bench.datasets import check_dataset, trace_requests
from tuner.bench.prompts import TokenPool
from tuner.bench.trace import BLOCK_TOKENS, TraceRow, block_reuse

POOL = TokenPool(ids=tuple(range(1000, 31000)), decode=None, source="test ids")


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def mooncake(ts_ms: float, ids: list[int], n_in: int | None = None, n_out: int = 4) -> dict:
    """One Mooncake record; input_length defaults to whole blocks."""
    n = len(ids) * BLOCK_TOKENS if n_in is None else n_in
    return {"timestamp": ts_ms, "input_length": n, "output_length": n_out, "hash_ids": ids}


def trace(tmp_path: Path, rows: list[dict], **kw: Any) -> Workload:
    f = write_jsonl(tmp_path / "trace.jsonl", rows)
    return Workload(num_prompts=kw.pop("num_prompts", 1000), dataset_path=str(f),
                    dataset_kind="trace", **kw)  # fmt: skip


def tokens(tmp_path: Path, rows: list[dict], **kw: Any) -> list[list[int]]:
    prompts = trace_requests(trace(tmp_path, rows, **kw), POOL).prompts
    out = [p.prompt for p in prompts]
    assert all(isinstance(p, list) for p in out)
    return out  # type: ignore[return-value]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# ---- parsing ----------------------------------------------------------------------


def test_both_formats_parse_in_time_order(tmp_path: Path) -> None:
    old = [{"timestamp": t, "input_len": 7, "output_len": 3} for t in (2.5, 1.0)]
    rep = trace_requests(trace(tmp_path, old), POOL)
    assert rep.offsets == [0.0, 1.5] and [p.prompt_len for p in rep.prompts] == [7, 7]
    assert rep.block_reuse == 0.0  # random tokens: nothing to reuse

    new = [mooncake(3000, [1, 2]), mooncake(1000, [1], n_in=100, n_out=9)]
    rep = trace_requests(trace(tmp_path, new), POOL)
    assert rep.offsets == [0.0, 2.0]  # milliseconds
    assert [(p.prompt_len, p.output_len) for p in rep.prompts] == [(100, 9), (1024, 4)]


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        (mooncake(0, [1, "2"]), "hash id '2'"),
        (mooncake(0, [1, 2.0]), "hash id 2.0"),
        (mooncake(0, [True]), "hash id True"),
        (mooncake(0, [-1]), "hash id -1"),
        (mooncake(0, [2**64]), "hash id"),
        ({**mooncake(0, [1]), "hash_ids": "1,2"}, "hash_ids must be a list"),
        ({**mooncake(0, [1]), "hash_ids": list(range(30_000))}, "more blocks"),
        ({**mooncake(0, [1]), "input_length": 0}, "input_length"),
        ({**mooncake(0, [1]), "output_length": 10**12}, "output_length"),
        ({**mooncake(0, [1]), "timestamp": "noon"}, "milliseconds"),
        ({"timestamp": 5, "input_len": 4, "output_len": 4}, "tunelab's trace format"),
    ],
)
def test_bad_mooncake_lines_are_named(tmp_path: Path, record: dict, needle: str) -> None:
    wl = trace(tmp_path, [mooncake(0, [1]), record])
    with pytest.raises(WorkloadError, match=needle) as err:
        check_dataset(wl)
    assert f"{wl.dataset_path} line 2" in str(err.value) and err.value.fix


def test_a_mooncake_line_in_an_old_trace_is_named(tmp_path: Path) -> None:
    wl = trace(tmp_path, [{"timestamp": 0, "input_len": 4, "output_len": 4}, mooncake(1, [1])])
    with pytest.raises(WorkloadError, match="line 2 is a Mooncake record"):
        check_dataset(wl)


# ---- block identity -----------------------------------------------------------------


def test_shared_ids_share_exactly_their_blocks(tmp_path: Path) -> None:
    a, b, c = tokens(tmp_path, [mooncake(0, [1, 2, 10]), mooncake(1, [1, 2, 11]),
                                mooncake(2, [1, 3])])  # fmt: skip
    assert len(a) == len(b) == 3 * BLOCK_TOKENS and len(c) == 2 * BLOCK_TOKENS
    assert common_prefix(a, b) == 2 * BLOCK_TOKENS  # [1, 2] shared, then they differ
    assert common_prefix(a, c) == BLOCK_TOKENS  # [1, 3] shares only block 1 with [1, 2]
    assert a[BLOCK_TOKENS:] != c[BLOCK_TOKENS:]


def test_blocks_are_seeded_and_lengths_are_kept(tmp_path: Path) -> None:
    rows = [mooncake(0, [1, 2], n_in=700), mooncake(1, [1, 2], n_in=300),
            mooncake(2, [1], n_in=900), mooncake(3, [1], n_in=900)]  # fmt: skip
    a, cut, pad1, pad2 = tokens(tmp_path, rows)
    assert len(a) == 700 and cut == a[:300]  # ids past input_length describe no token
    assert len(pad1) == len(pad2) == 900 and pad1[:BLOCK_TOKENS] == a[:BLOCK_TOKENS]
    assert common_prefix(pad1, pad2) == BLOCK_TOKENS  # padding is each request's own
    assert tokens(tmp_path, rows)[0] == a  # same seed, same tokens
    assert common_prefix(tokens(tmp_path, rows, seed=7)[0], a) < 5  # another seed: unrelated


# ---- the trace's block reuse --------------------------------------------------------


def row(ids: list[int] | None, n: int, line: int = 1) -> TraceRow:
    return TraceRow(0.0, n, 1, None if ids is None else tuple(ids), line)


def test_block_reuse_on_a_hand_made_trace() -> None:
    rows = [row([1, 2], 1024), row([1, 2, 3], 1536), row([1, 4], 1024), row([5], 512)]
    assert block_reuse(rows) == pytest.approx((1024 + 512) / 4096)


def test_block_reuse_counts_tokens_and_prefix_chains() -> None:
    # A cut block shares only its beginning; a longer request pads tokens nobody has.
    assert block_reuse([row([1], 300), row([1], 512)]) == pytest.approx(300 / 812)
    assert block_reuse([row([1], 512), row([1], 900)]) == pytest.approx(512 / 1412)
    # Id 1 at block 2 under another prefix is other content to a prefix cache.
    assert block_reuse([row([1, 2], 1024), row([7, 1], 1024)]) == 0.0
    assert block_reuse([row([1], 512), row([1], 512)]) == pytest.approx(0.5)
    assert block_reuse([row(None, 512), row(None, 512)]) == 0.0


# ---- time scale -----------------------------------------------------------------------


def test_time_scale_multiplies_the_gaps(tmp_path: Path) -> None:
    rows = [mooncake(1000, [1]), mooncake(1500, [2]), mooncake(3000, [3])]
    assert trace_requests(trace(tmp_path, rows), POOL).offsets == [0.0, 0.5, 2.0]
    fast = trace_requests(trace(tmp_path, rows, time_scale=0.5), POOL).offsets
    assert fast == [0.0, 0.25, 1.0]
    slow = trace(tmp_path, rows, time_scale=1000)
    assert trace_requests(slow, POOL).offsets[-1] == pytest.approx(2000.0)
    week = trace(tmp_path, [mooncake(0, [1]), mooncake(400_000_000, [2])], time_scale=2)
    with pytest.raises(WorkloadError, match="time scale 2"):
        trace_requests(week, POOL)


@pytest.mark.parametrize("scale", [0, -1, 1e-9, 1e6, math.nan, math.inf, "2", True])
def test_time_scale_is_checked(tmp_path: Path, scale: object) -> None:
    with pytest.raises(WorkloadError, match="time_scale must be"):
        trace(tmp_path, [mooncake(0, [1])], time_scale=scale)


def test_time_scale_needs_a_trace_and_round_trips(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="no trace") as err:
        Workload(time_scale=0.5)
    assert "--time-scale" in (err.value.fix or "")
    assert "time_scale" not in Workload().to_dict()  # studies key trials on this dict
    wl = trace(tmp_path, [mooncake(0, [1])], time_scale=0.5)
    assert wl.to_dict()["time_scale"] == 0.5 and Workload.from_dict(wl.to_dict()) == wl


# ---- in the result and on the CLI (programmable stub) ---------------------------------


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProcess]:
    with StubProcess({"ttft_ms": 2, "itl_ms": 1, "prefix_hit_rate": 0.25}) as s:
        yield s


SHARED = [mooncake(0, [1, 10]), mooncake(20, [1, 11]), mooncake(40, [2, 12]),
          mooncake(60, [1, 10, 13])]  # fmt: skip  # reuse (512 + 1024) / 4608


async def test_the_result_holds_both_figures(
    stub: StubProcess, tmp_path: Path, demo_model_path: Path
) -> None:
    stub.reset({"ttft_ms": 2, "itl_ms": 1, "prefix_hit_rate": 0.25})
    wl = trace(tmp_path, SHARED, time_scale=0.5)
    async with asyncio.timeout(30):
        res = await run_benchmark(stub.url, None, wl, tokenizer_path=str(demo_model_path))
    assert res.completed == 4
    extra = res.to_dict()["tunelab"]
    assert extra["trace_block_reuse"] == pytest.approx(1536 / 4608)
    assert extra["server"]["prefix_cache_hit_rate"] == pytest.approx(0.25, abs=0.01)
    heads = [tuple(e["prompt_head"]) for e in stub.log()]
    assert heads[0] == heads[1] == heads[3] != heads[2]  # block 1 went out three times
    assert [e["prompt_len"] for e in stub.log()] == [1024, 1024, 1024, 1536]
    released = [r.arrival - res.records[0].arrival for r in res.records]
    assert released[-1] == pytest.approx(0.030, abs=0.02)  # 60 ms at time scale 0.5


def test_the_cli_prints_both_figures(
    stub: StubProcess, tmp_path: Path, demo_model_path: Path
) -> None:
    from tuner.cli.app import app, register_all

    register_all(app)
    stub.reset({"ttft_ms": 2, "itl_ms": 1, "prefix_hit_rate": 0.25})
    f = write_jsonl(tmp_path / "trace.jsonl", SHARED)
    args = ["bench", "--url", stub.url, "--dataset", str(f), "--dataset-kind", "trace",
            "--time-scale", "0.5", "--tokenizer", str(demo_model_path)]  # fmt: skip
    r = CliRunner().invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "engine hit rate 25 %, the trace's block reuse 33 %" in r.output
    bad = CliRunner().invoke(app, [*args[:5], "--time-scale", "0"], catch_exceptions=False)
    assert bad.exit_code == 2 and "time_scale must be" in bad.output


# ---- on the real CPU engine --------------------------------------------------------------


def shared_prefix_trace(seed_ids: int = 0) -> list[dict]:
    """24 requests of 2-3 blocks: 4 system blocks, 8 conversations, a unique tail each.

    Every tail is a partial block of its own, so the reused part is whole
    512-token blocks (whole 128-token engine blocks) and never holds a
    prompt's last token: vLLM's hit count then equals the trace's reuse.
    """
    rows = []
    for r in range(24):
        conv = r % 8
        system, context, tail = 1 + conv % 4, 100 + conv, 1000 + r
        ids = [system, context, tail] if r % 3 else [system, tail]
        n_in = (len(ids) - 1) * BLOCK_TOKENS + 300 + 10 * (r % 5)
        rows.append(mooncake(r * 50, [seed_ids + i for i in ids], n_in=n_in))
    return rows


@pytest.mark.engine
def test_engine_hit_rate_follows_the_trace_reuse(
    cpu_engine, demo_model_path: Path, tmp_path: Path
) -> None:
    """The engine's prefix-cache hits track the trace's block reuse; random content gets none.

    One request at a time (concurrency 1), so each prompt's blocks are cached
    before the next arrives, as the trace's "earlier request" assumes. The
    seed is this test's own: the session's shared engine keeps its cache
    across tests.
    """
    rows = shared_prefix_trace()
    wl = trace(tmp_path, rows, concurrency=1, seed=30_001)

    def bench(workload: Workload):
        return asyncio.run(run_benchmark(cpu_engine.url, cpu_engine.served_model, workload,
                                         tokenizer_path=str(demo_model_path)))  # fmt: skip

    res = bench(wl)
    reuse, hit = res.trace_block_reuse, res.server.prefix_cache_hit_rate
    print(f"\ntrace block reuse {reuse:.3f}, engine prefix-cache hit rate {hit}")
    assert res.completed == 24 and reuse is not None and 0.3 < reuse < 0.7
    assert hit is not None and abs(hit - reuse) <= 0.10

    plain = [{"timestamp": r["timestamp"] / 1000, "input_len": r["input_length"],
              "output_len": r["output_length"]} for r in rows]  # fmt: skip
    f = write_jsonl(tmp_path / "random.jsonl", plain)
    res = bench(Workload(num_prompts=24, concurrency=1, seed=30_002, dataset_path=str(f),
                         dataset_kind="trace"))  # fmt: skip
    hit = res.server.prefix_cache_hit_rate
    print(f"random content: trace block reuse {res.trace_block_reuse}, engine hit rate {hit}")
    assert res.completed == 24 and res.trace_block_reuse == 0.0
    assert hit is not None and hit < 0.05
