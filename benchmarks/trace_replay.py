"""Does a replayed Mooncake trace hit vLLM's prefix cache as much as the trace reuses?

Generates a Mooncake-format trace with a fixed seed (``timestamp`` in ms,
``input_length``, ``output_length``, ``hash_ids``, one id per 512-token
block): ``--sessions`` chat sessions, each opening with one of
``--systems`` shared system-prompt blocks, over ``--turns`` turns whose
context grows by one block a turn (turn t's new text, a partial block, is
turn t+1's full one, as in the FAST'25 traces), sessions arriving as a
Poisson process and turns a few seconds apart. Then replays it through
``run_benchmark`` on the real vLLM CPU engine (tiny demo model; or
``--url`` a running server with ``--tokenizer``) and, for contrast, the
same lengths and times in tunelab's own trace format (random tokens).

For each replay it prints the trace's block-reuse ratio
(tuner.bench.trace.block_reuse), the engine's prefix-cache hit rate (its
/metrics counters over the run) and what a perfect cache of
``--engine-block`` token blocks could hit: vLLM counts whole engine blocks
only and recomputes a prompt's last token, so a partially reused 512-token
block reads lower in the engine (docs/trace-replay.md). Run under the
engine lock on a shared box::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/trace_replay.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.engine_thread import EngineThread  # noqa: E402
from tuner.bench import Workload, run_benchmark  # noqa: E402
from tuner.bench.trace import BLOCK_TOKENS, TraceRow, reused_tokens  # noqa: E402
from tuner.config import EngineConfig  # noqa: E402
from tuner.cpu_demo import DEMO_ENGINE_ARGS  # noqa: E402
from tuner.demo_model import ensure_demo_model  # noqa: E402
from tuner.engine import EngineSpec  # noqa: E402


def make_trace(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The Mooncake-format records, in time order (seeded: the same every run)."""
    rng = random.Random(args.seed)
    records: list[dict[str, Any]] = []
    next_id = args.systems  # ids 0..systems-1 are the system prompts
    start = 0.0
    for s in range(args.sessions):
        start += rng.expovariate(1.0 / args.session_gap_s)
        chain = [s % args.systems]
        t = start
        for _ in range(args.turns):
            chain.append(next_id)  # this turn's new text; the next turn's full block
            next_id += 1
            n_in = (len(chain) - 1) * BLOCK_TOKENS + rng.randint(64, args.tail_max)
            records.append({"timestamp": round(t * 1000), "input_length": n_in,
                            "output_length": args.output_len, "hash_ids": list(chain)})  # fmt: skip
            t += rng.uniform(args.think_s / 2, args.think_s * 1.5)
    records.sort(key=lambda r: r["timestamp"])
    return records


def engine_bound(records: list[dict[str, Any]], block: int) -> float:
    """What a perfect prefix cache of ``block``-token blocks hits, as vLLM counts it."""
    rows = [TraceRow(r["timestamp"] / 1000, r["input_length"], r["output_length"],
                     tuple(r["hash_ids"]), i) for i, r in enumerate(records)]  # fmt: skip
    reused = reused_tokens(rows)
    hits = sum(
        min(r, row.input_len - 1) // block * block for r, row in zip(reused, rows, strict=True)
    )
    return hits / sum(row.input_len for row in rows)


def plain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same requests in tunelab's own trace format: random tokens, seconds."""
    return [{"timestamp": r["timestamp"] / 1000, "input_len": r["input_length"],
             "output_len": r["output_length"]} for r in records]  # fmt: skip


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


async def replay(
    url: str, model: str | None, tokenizer: str, path: Path, args: argparse.Namespace, n: int
) -> Any:
    wl = Workload(num_prompts=n, dataset_path=str(path), dataset_kind="trace",
                  time_scale=args.time_scale, seed=args.seed,
                  concurrency=args.concurrency)  # fmt: skip
    return await run_benchmark(url, model, wl, tokenizer_path=tokenizer)


def report(name: str, res: Any, bound: float | None = None, block: int = 0) -> None:
    hit = res.server.prefix_cache_hit_rate
    reuse = res.trace_block_reuse
    line = (f"{name:>9}: {res.completed} requests in {res.metrics['duration']:.1f} s, "
            f"{res.metrics['total_input_tokens']} prompt tokens; trace block reuse "
            f"{reuse:.1%}, engine prefix-cache hit rate "
            f"{'n/a' if hit is None else format(hit, '.1%')}")  # fmt: skip
    if bound is not None:
        line += f" (a perfect cache of {block}-token blocks would hit {bound:.1%})"
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--systems", type=int, default=4, help="shared system-prompt blocks")
    ap.add_argument("--turns", type=int, default=3, help="turns per session (context grows)")
    ap.add_argument("--tail-max", type=int, default=400, help="most tokens of a turn's new text")
    ap.add_argument("--output-len", type=int, default=8)
    ap.add_argument("--session-gap-s", type=float, default=0.5)
    ap.add_argument("--think-s", type=float, default=4.0)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=None)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--engine-block", type=int, default=128, help="vLLM CPU's default block")
    ap.add_argument("--url", help="a running server instead of the CPU demo engine")
    ap.add_argument("--tokenizer", help="with --url: tokenizer.json or model dir")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tunelab-trace-"))
    os.environ["TUNELAB_HOME"] = str(home)
    records = make_trace(args)
    moon = write(home / "mooncake.jsonl", records)
    rand = write(home / "random.jsonl", plain(records))
    blocks = sum(len(r["hash_ids"]) for r in records)
    print(f"trace: {len(records)} requests, {blocks} blocks, "
          f"{sum(r['input_length'] for r in records)} prompt tokens, "
          f"{records[-1]['timestamp'] / 1000:.1f} s long (time scale {args.time_scale:g}); "
          f"file {moon}", flush=True)  # fmt: skip
    runner = None
    if args.url:
        url, model, tokenizer = args.url, None, args.tokenizer or ""
    else:
        demo = ensure_demo_model()
        spec = EngineSpec(config=EngineConfig(model=str(demo), engine=dict(DEMO_ENGINE_ARGS)),
                          log_path=home / "engine.log", startup_timeout=600)  # fmt: skip
        runner = EngineThread(spec)
        eng = runner.start()
        url, model, tokenizer = eng.url, eng.served_model, str(demo)
    try:
        res = asyncio.run(replay(url, model, tokenizer, moon, args, len(records)))
        report("mooncake", res, engine_bound(records, args.engine_block), args.engine_block)
        res = asyncio.run(replay(url, model, tokenizer, rand, args, len(records)))
        report("random", res)
    finally:
        if runner is not None:
            runner.stop()


if __name__ == "__main__":
    main()
