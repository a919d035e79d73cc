"""Do the benchmark clients of trials running side by side limit each other?

A study on N GPU slots runs N trials at once, and today every trial's
benchmark client runs in the one tunelab process, on one event loop
(``TrialRunner.all`` -> ``run_parallel`` -> ``run_trial`` ->
``run_benchmark``). If that process cannot take in what N engines stream,
the slower trials measure the client, not the engine. This script measures
it against engine doubles — one paced stub server per trial
(tests/support/openai_stub.py: a fixed time to first token and gap between
tokens, so each stub streams at a known rate no matter how many run) — with
1, 2 and 4 trials at once, in two layouts:

* ``shared``: the k clients in one process, one event loop (what studies do);
* ``separate``: each client in its own process, started by hand;
* ``product``: one study process whose k clients each run in a process of
  their own through ``tuner.bench.own_process.run_in_process`` (what the
  trial runner does for trials side by side on GPU slots since issue 15).

Per layout and k it prints the achieved output tokens/s and requests/s per
trial (median over rounds), the aggregate, the client CPU (busy share of one
core, and output tokens per client CPU-second: the client's ceiling), and the
ratios per-trial rate at k / at 1, and shared / separate. If the shared
per-trial rate falls with k while the separate one holds, the clients limit
each other, by that ratio.

    .venv/bin/python benchmarks/client_headroom.py [--repeats 3] [--trials 1 2 4]
        [--itl-ms 5] [--concurrency 32] [--num-prompts 256] [--output-len 128]

The rounds alternate the layouts (shared, separate, shared, ...), so slow
drift in the machine's other load hits both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_KEYS = ("output_throughput", "request_throughput", "completed", "failed", "duration")


def _child(argv: list[str]) -> None:
    """Run clients for ``urls`` in THIS process, side by side on one loop; print results."""
    product = argv[0] == "--product"
    urls, n, inp, out, conc = argv[1:] if product else argv
    import resource

    from tuner.bench import Workload, run_benchmark
    from tuner.bench.own_process import run_in_process

    wl = Workload(
        input_len=int(inp), output_len=int(out), num_prompts=int(n), concurrency=int(conc)
    )

    async def all_clients() -> list:
        if product:
            return await asyncio.gather(
                *(run_in_process(u, "stub-model", wl) for u in urls.split(","))
            )
        return await asyncio.gather(
            *(
                run_benchmark(u, "stub-model", wl, metrics_interval_s=3600.0)
                for u in urls.split(",")
            )
        )

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu0, kids0, t0 = time.process_time(), children_cpu(), time.perf_counter()
    results = asyncio.run(all_clients())
    cpu = time.process_time() - cpu0 + children_cpu() - kids0
    wall = time.perf_counter() - t0
    rows = [{k: r.to_dict()[k] for k in _KEYS} for r in results]
    tokens = sum(r.to_dict()["total_output_tokens"] for r in results)
    print("RESULT " + json.dumps({"clients": rows, "cpu_s": cpu, "wall_s": wall, "tokens": tokens}))


def _spawn(urls: list[str], shape: tuple[int, ...], product: bool = False) -> subprocess.Popen[str]:
    mode = ["--product"] if product else []
    cmd = [sys.executable, __file__, "--child", *mode, ",".join(urls), *map(str, shape)]
    return subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _collect(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=900)
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"client run failed:\n{(out + err)[-2000:]}")


def run_layout(layout: str, urls: list[str], shape: tuple[int, ...]) -> dict:
    """One measurement: k clients shared in one process, or one process each."""
    t0 = time.perf_counter()
    if layout in ("shared", "product"):
        parts = [_collect(_spawn(urls, shape, product=layout == "product"))]
    else:
        procs = [_spawn([u], shape) for u in urls]
        parts = [_collect(p) for p in procs]
    wall = time.perf_counter() - t0
    clients = [c for p in parts for c in p["clients"]]
    if any(c["failed"] for c in clients):
        raise SystemExit(f"{layout}: failed requests {[c['failed'] for c in clients]}")
    cpu = sum(p["cpu_s"] for p in parts)
    busy = max(p["cpu_s"] / p["wall_s"] for p in parts)  # the busiest client process
    return {
        "per_trial_tok_s": statistics.fmean(c["output_throughput"] for c in clients),
        "per_trial_req_s": statistics.fmean(c["request_throughput"] for c in clients),
        "aggregate_tok_s": sum(c["output_throughput"] for c in clients),
        "tok_per_cpu_s": sum(p["tokens"] for p in parts) / cpu if cpu else float("nan"),
        "busy": busy,
        "wall_s": wall,
    }


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trials", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--itl-ms", type=float, default=5.0, help="stub gap between tokens")
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--num-prompts", type=int, default=256)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    from tests.support.openai_stub import StubProcess

    shape = (args.num_prompts, args.input_len, args.output_len, args.concurrency)
    pace = args.concurrency * 1000.0 / args.itl_ms
    print(
        f"per trial: {args.num_prompts} prompts, {args.input_len} in / {args.output_len} out, "
        f"concurrency {args.concurrency}; stub paced at TTFT {args.ttft_ms:g} ms, ITL "
        f"{args.itl_ms:g} ms (at most ~{pace:,.0f} tok/s per trial)"
    )
    plan = {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms}
    table: dict[tuple[str, int], list[dict]] = {}
    with ExitStack() as stack:
        stubs = [
            stack.enter_context(StubProcess(plan, uvloop=True)) for _ in range(max(args.trials))
        ]
        for rnd in range(args.repeats):
            for k in args.trials:
                urls = [s.url for s in stubs[:k]]
                layouts = ("shared", "product", "separate")
                for layout in layouts if rnd % 2 == 0 else layouts[::-1]:
                    if k == 1 and layout == "separate":
                        continue  # one client: the two layouts are the same
                    row = run_layout(layout, urls, shape)
                    table.setdefault((layout, k), []).append(row)
                    print(
                        f"round {rnd + 1} k={k} {layout:8} per trial {row['per_trial_tok_s']:7,.0f} "
                        f"tok/s {row['per_trial_req_s']:6.1f} req/s, busiest client process "
                        f"{row['busy']:4.0%} of a core, {row['tok_per_cpu_s']:7,.0f} tok per CPU-s",
                        flush=True,
                    )
    _summary(table, args.trials)


def _summary(table: dict[tuple[str, int], list[dict]], ks: list[int]) -> None:
    def med(layout: str, k: int, key: str) -> float:
        rows = table.get((layout, k)) or table[("shared", k)]
        return statistics.median(r[key] for r in rows)

    base = med("shared", ks[0], "per_trial_tok_s")
    print("\nmedians | k | layout | per-trial tok/s | x k=1 | req/s | aggregate tok/s | busiest "
          "client | tok per client CPU-s | / separate")  # fmt: skip
    for k in ks:
        for layout in ("shared", "product", "separate"):
            if k == ks[0] and layout == "separate":
                continue
            per = med(layout, k, "per_trial_tok_s")
            ratio = per / med("separate", k, "per_trial_tok_s") if layout != "separate" else 1.0
            print(
                f"  k={k} {layout:8} {per:9,.0f} {per / base:6.2f} "
                f"{med(layout, k, 'per_trial_req_s'):7.1f} {med(layout, k, 'aggregate_tok_s'):10,.0f} "
                f"{med(layout, k, 'busy'):6.0%} {med(layout, k, 'tok_per_cpu_s'):10,.0f} "
                + (f"{ratio:6.2f}" if layout != "separate" and k != ks[0] else "")
            )
    ceiling = med("shared", ks[-1], "tok_per_cpu_s")
    print(
        f"\none client process takes in about {ceiling:,.0f} output tokens per CPU-second: "
        "trials whose engines together stream more than that (per core the study process "
        "gets) are limited by their shared client"
    )


if __name__ == "__main__":
    main()
