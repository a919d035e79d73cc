"""Replaying recorded conversations: does the history reach vLLM's prefix cache?

Writes an OpenAI-chat JSONL file with a fixed seed (``--conversations`` chats of ``--turns``
user turns each, ``--words`` words a turn from a small vocabulary, a shared system prompt per
``--systems`` group, the recorded assistant replies included — tunelab drops them and sends
the server's own), then runs it as ``--dataset-kind sessions --dataset FILE`` on the real
vLLM CPU engine (tiny demo model; or ``--url`` with ``--tokenizer``), and for contrast sends
the same user turns as single-turn JSONL prompts (no history). Prints each run's per-turn
prompt tokens and TTFT and the engine's prefix-cache hit rate (its /metrics counters). Run
under the engine lock on a shared box::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/recorded_sessions.py
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
from tuner.config import EngineConfig  # noqa: E402
from tuner.cpu_demo import DEMO_ENGINE_ARGS  # noqa: E402
from tuner.demo_model import ensure_demo_model  # noqa: E402
from tuner.engine import EngineSpec  # noqa: E402

WORDS = [
    "cache", "block", "token", "batch", "kernel", "prefill", "decode", "latency", "memory",
    "graph", "queue", "tensor", "expert", "layer", "head", "scale", "window", "prompt",
    "answer", "system",
]  # fmt: skip


def make_chats(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The chat records (seeded): a system prompt, then user/assistant pairs."""
    rng = random.Random(args.seed)
    systems = [" ".join(rng.choices(WORDS, k=args.system_words)) for _ in range(args.systems)]
    chats = []
    for c in range(args.conversations):
        messages = [{"role": "system", "content": systems[c % args.systems]}]
        for _ in range(args.turns):
            messages.append({"role": "user", "content": " ".join(rng.choices(WORDS, k=args.words))})
            messages.append({"role": "assistant", "content": "a recorded reply tunelab drops"})
        chats.append({"messages": messages})
    return chats


def report(name: str, res: Any) -> None:
    hit = res.server.prefix_cache_hit_rate
    print(f"{name:>9}: {res.completed} requests in {res.metrics['duration']:.1f} s, "
          f"{res.metrics['total_input_tokens']} prompt tokens, output "
          f"{res.metrics['output_throughput']:.0f} tok/s, engine prefix-cache hit rate "
          f"{'n/a' if hit is None else format(hit, '.1%')}", flush=True)  # fmt: skip
    turns = (res.to_dict().get("tunelab", {}).get("sessions") or {}).get("turns") or []
    for t in turns:
        print(f"           turn {t['turn']}: {t['completed']}/{t['requests']} answered, "
              f"{t['mean_prompt_len']:.0f} prompt tokens, TTFT p50 {t['median_ttft_ms']:.1f} ms",
              flush=True)  # fmt: skip


async def run(url: str, model: str | None, tokenizer: str, wl: Workload) -> Any:
    return await run_benchmark(url, model, wl, tokenizer_path=tokenizer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=32)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--words", type=int, default=60, help="words of each user turn")
    ap.add_argument("--systems", type=int, default=4)
    ap.add_argument("--system-words", type=int, default=200)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--url", help="a running server instead of the CPU demo engine")
    ap.add_argument("--tokenizer", help="with --url: tokenizer.json or model dir")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tunelab-chats-"))
    os.environ["TUNELAB_HOME"] = str(home)
    chats = make_chats(args)
    chat_file = home / "chats.jsonl"
    chat_file.write_text("\n".join(json.dumps(c) for c in chats) + "\n")
    single = home / "single.jsonl"
    single.write_text("".join(
        json.dumps({"prompt": m["content"], "output_len": args.output_len}) + "\n"
        for c in chats for m in c["messages"] if m["role"] == "user"))  # fmt: skip
    print(f"file: {len(chats)} conversations x {args.turns} turns, {chat_file}", flush=True)
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
    common = dict(output_len=args.output_len, concurrency=args.concurrency, seed=args.seed,
                  endpoint="chat", warmup_requests=0)  # fmt: skip
    try:
        wl = Workload(
            dataset_kind="sessions",
            dataset_path=str(chat_file),
            num_prompts=args.conversations,
            **common,
        )  # type: ignore[arg-type]
        report("sessions", asyncio.run(run(url, model, tokenizer, wl)))
        wl = Workload(
            dataset_kind="jsonl",
            dataset_path=str(single),
            num_prompts=args.conversations * args.turns,
            **common,
        )  # type: ignore[arg-type]
        report("single", asyncio.run(run(url, model, tokenizer, wl)))
    finally:
        if runner is not None:
            runner.stop()


if __name__ == "__main__":
    main()
