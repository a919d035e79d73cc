"""Datasets users tune with (issue 19 "Then" 8), checked against what the stub server received.

The programmable stub (tests/support/openai_stub.py) logs each request's
prompt (its first ids and length), max_tokens and arrival time, so each
dataset is checked on the wire: custom JSONL prompts and their output
lengths, prefix-sharing prompts (N distinct prefixes, each shared), and a
trace replayed at its timestamps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openai_stub import StubProcess
from tuner.bench import Workload, WorkloadError, run_benchmark


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProcess]:
    with StubProcess({"ttft_ms": 5, "itl_ms": 1}) as s:
        yield s


async def run(stub: StubProcess, wl: Workload, **kw):
    stub.reset({"ttft_ms": 5, "itl_ms": 1})
    async with asyncio.timeout(30):
        res = await run_benchmark(stub.url, None, wl, **kw)
    return res, stub.log()


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


async def test_custom_jsonl_prompts_and_output_lengths(stub: StubProcess, tmp_path: Path) -> None:
    rows = [{"prompt": f"question number {i} please", "output_len": 2 + i} for i in range(3)]
    rows.append({"prompt": "no length given here"})
    f = write_jsonl(tmp_path / "p.jsonl", rows)
    wl = Workload(num_prompts=8, output_len=7, concurrency=2, dataset_path=str(f),
                  dataset_kind="jsonl")  # fmt: skip
    res, log = await run(stub, wl)
    assert res.metrics["completed"] == 8
    sent = {(e["prompt_head"], e["max_tokens"]) for e in log}
    want = {(r["prompt"][:40], r.get("output_len", 7)) for r in rows}
    assert sent == want  # every prompt went out with its own output length


async def test_prefix_sharing_prompts(stub: StubProcess, demo_model_path: Path) -> None:
    wl = Workload(input_len=6, output_len=2, num_prompts=9, concurrency=3, dataset_kind="prefix",
                  prefix_groups=3, prefix_len=16)  # fmt: skip
    res, log = await run(stub, wl, tokenizer_path=str(demo_model_path))
    assert res.metrics["completed"] == 9
    assert all(e["prompt_len"] == 16 + 6 for e in log)
    heads = [tuple(e["prompt_head"]) for e in log]
    assert len(set(heads)) == 3 and all(heads.count(h) == 3 for h in set(heads))


async def test_trace_replay_follows_the_timestamps(stub: StubProcess, tmp_path: Path) -> None:
    stamps = [100.0, 100.0, 100.4, 101.0, 101.2]
    rows = [{"timestamp": t, "input_len": 5 + i, "output_len": 3} for i, t in enumerate(stamps)]
    f = write_jsonl(tmp_path / "trace.jsonl", list(reversed(rows)))  # order on file: any
    wl = Workload(num_prompts=100, dataset_path=str(f), dataset_kind="trace")
    res, log = await run(stub, wl)
    assert res.metrics["completed"] == 5
    # Released on the trace's clock (records keep their release time, same clock as t_recv).
    released = [r.arrival - res.records[0].arrival for r in res.records]
    for got, want in zip(released, [t - 100.0 for t in stamps], strict=True):
        assert want - 0.005 <= got <= want + 0.05, (released, stamps)
    first = min(e["t_recv"] for e in log)
    assert max(e["t_recv"] for e in log) - first >= 1.2 - 0.05  # the server saw it spread out
    assert sorted(e["prompt_len"] for e in log) == [5, 6, 7, 8, 9]


@pytest.mark.parametrize(
    ("rows", "kind", "needle"),
    [
        (["not json"], "jsonl", "line 1 is not JSON"),
        ([{"prompt": ""}], "jsonl", "'prompt' must be non-empty"),
        ([{"timestamp": "noon", "input_len": 4, "output_len": 4}], "trace", "timestamp"),
        ([{"timestamp": 1, "input_len": -4, "output_len": 4}], "trace", "input_len"),
    ],
)
async def test_bad_dataset_lines_are_named(
    stub: StubProcess, tmp_path: Path, rows: list, kind: str, needle: str
) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows))
    wl = Workload(num_prompts=2, dataset_path=str(f), dataset_kind=kind)
    with pytest.raises(WorkloadError, match=needle):
        await run(stub, wl)


def test_dataset_kind_validation() -> None:
    with pytest.raises(WorkloadError, match="prefix-groups"):
        Workload(dataset_kind="prefix")
    with pytest.raises(WorkloadError, match="needs --dataset"):
        Workload(dataset_kind="trace")
    with pytest.raises(WorkloadError, match="dataset kind"):
        Workload(dataset_kind="csv")
