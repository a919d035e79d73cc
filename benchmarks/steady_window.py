"""Run-to-run spread of output throughput: whole run vs steady window, short vs long window.

Issue 30 asks whether the default workload's noise is the engine or the window. On one
real vLLM CPU engine (tiny demo model) this runs, interleaved, ``--rounds`` times each:

* the TUI's default workload (32 requests at concurrency 8, 128 in / 64 out, 4 warm-ups);
* the same with ``--long`` requests (a longer window, same shape).

For every run it takes the whole-run output throughput (vLLM's definition: all output
tokens over the whole run) and the steady window's (tuner.bench.steady: from
``concurrency`` requests in flight to the last send, tokens that arrived inside it), and
prints each figure's median and coefficient of variation (CV = stdev / mean) side by side,
with the window lengths. Run under the engine lock on a shared box::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/steady_window.py --rounds 8

``--layout`` runs the default workload twice per round instead, interleaved on one engine:
with the engine's processes laid out as every CPU trial now lays them out
(tuner.engine.cpu_layout: the EngineCore beside vLLM's worker, the API server apart) and
with the threads' affinities as vLLM left them (the worker bound, the rest free: how every
trial ran before), and the long window laid out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.engine_thread import EngineThread  # noqa: E402
from tuner.bench import Workload, run_benchmark  # noqa: E402
from tuner.bench.steady import steady_window  # noqa: E402
from tuner.config import EngineConfig  # noqa: E402
from tuner.cpu_demo import DEMO_ENGINE_ARGS  # noqa: E402
from tuner.demo_model import ensure_demo_model  # noqa: E402
from tuner.engine import EngineSpec  # noqa: E402
from tuner.engine.cpu_layout import split, threads  # noqa: E402


class Layouts:
    """Switch one engine between vLLM's own thread affinities and tunelab's layout."""

    def __init__(self, root: int, pids: set[int]) -> None:
        self.root, self.pids = root, pids
        self.saved = {tid: os.sched_getaffinity(tid) for pid in pids for tid in threads(pid)}

    def vllm(self) -> None:
        for tid, cores in self.saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cores)

    def tunelab(self) -> None:
        made = split(self.root, self.pids)
        assert not made.reason, made.reason


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


async def one(
    url: str, model: str, tokenizer: str, wl: Workload
) -> tuple[float, float, float, float]:
    """(whole-run tok/s, steady tok/s, whole-run s, steady s) of one run."""
    res = await run_benchmark(url, model, wl, tokenizer_path=tokenizer)
    assert res.failed == 0, res.failures.describe()
    win = steady_window(res.records, wl.concurrency or 1)
    assert win is not None
    return (
        res.metrics["output_throughput"],
        win.output_throughput,
        res.metrics["duration"],
        win.duration_s,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--long", type=int, default=256, help="requests of the long window")
    ap.add_argument("--layout", action="store_true", help="vLLM's affinities vs tunelab's")
    args = ap.parse_args()
    base = Workload(input_len=128, output_len=64, num_prompts=32, concurrency=8,
                    warmup_requests=4)  # fmt: skip  # tui.session.DEFAULT_WORKLOAD
    shapes = {"default (32 req)": base, f"long ({args.long} req)": Workload(
        input_len=128, output_len=64, num_prompts=args.long, concurrency=8, warmup_requests=4)}  # fmt: skip
    home = Path(tempfile.mkdtemp(prefix="steady-"))
    demo = ensure_demo_model()
    spec = EngineSpec(config=EngineConfig(model=str(demo), engine=dict(DEMO_ENGINE_ARGS)),
                      log_path=home / "engine.log", startup_timeout=600)  # fmt: skip
    runner = EngineThread(spec)
    eng = runner.start()
    layouts = None
    if args.layout:
        assert runner.engine is not None and runner.engine.pid is not None
        layouts = Layouts(runner.engine.pid, eng.pids)
        long = shapes.pop(f"long ({args.long} req)")
        shapes = {"default, vLLM's": base, "default, laid out": base,
                  f"long ({args.long}), laid out": long}  # fmt: skip
    figures: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in shapes}
    try:
        for r in range(args.rounds):
            for name, wl in shapes.items():
                if layouts is not None:
                    (layouts.vllm if "vLLM" in name else layouts.tunelab)()
                wl = Workload(**{**wl.__dict__, "seed": r})
                got = asyncio.run(one(eng.url, eng.served_model, str(demo), wl))
                figures[name].append(got)
                print(f"round {r + 1} {name}: whole {got[0]:.0f} tok/s over {got[2]:.2f} s, "
                      f"steady {got[1]:.0f} tok/s over {got[3]:.2f} s", flush=True)  # fmt: skip
    finally:
        runner.stop()
    print()
    print(f"{'workload':<18} {'whole tok/s':>12} {'CV':>6} {'steady tok/s':>13} {'CV':>6} "
          f"{'run s':>6} {'steady s':>9}")  # fmt: skip
    for name, rows in figures.items():
        whole, steady = [x[0] for x in rows], [x[1] for x in rows]
        print(f"{name:<18} {statistics.median(whole):>12.0f} {cv(whole):>6.1%} "
              f"{statistics.median(steady):>13.0f} {cv(steady):>6.1%} "
              f"{statistics.median(x[2] for x in rows):>6.2f} "
              f"{statistics.median(x[3] for x in rows):>9.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
