"""Measures a max-num-seqs x max-num-batched-tokens x concurrency grid on the CPU engine.

The data for ``benchmarks/perf_model.py`` (issue 31): one engine launch per (max-num-seqs,
max-num-batched-tokens) pair on the tiny demo model, each measured at every concurrency with
the same random workload, each point measured ``--repeats`` times. Writes a JSON list of
observations (the knobs, the workload, vLLM's result keys, the engine's own mean ITL) to ``--out``. Run under the
engine lock on a shared box::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/perf_model_grid.py \
        --out /tmp/perf-grid.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
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

KEYS = ("output_throughput", "median_itl_ms", "mean_itl_ms", "median_tpot_ms", "mean_tpot_ms",
        "median_ttft_ms",
        "mean_ttft_ms", "duration", "completed")  # fmt: skip


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=ints, default=[4, 16, 64])
    ap.add_argument("--mbt", type=ints, default=[256, 2048])
    ap.add_argument("--concurrency", type=ints, default=[2, 8, 32])
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--waves", type=int, default=4, help="num-prompts = waves x concurrency")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tunelab-grid-"))
    os.environ["TUNELAB_HOME"] = str(home)
    demo = ensure_demo_model()
    out: list[dict[str, Any]] = []
    for seqs, mbt in itertools.product(args.seqs, args.mbt):
        if mbt < seqs:
            continue
        engine = {**DEMO_ENGINE_ARGS, "max-num-seqs": seqs, "max-num-batched-tokens": mbt}
        spec = EngineSpec(config=EngineConfig(model=str(demo), engine=engine),
                          log_path=home / f"engine-{seqs}-{mbt}.log", startup_timeout=600)  # fmt: skip
        runner = EngineThread(spec)
        eng = runner.start()
        try:
            for conc, rep in itertools.product(args.concurrency, range(args.repeats)):
                wl = Workload(input_len=args.input_len, output_len=args.output_len,
                              num_prompts=args.waves * conc, concurrency=conc,
                              warmup_requests=2, seed=rep)  # fmt: skip
                res = asyncio.run(run_benchmark(eng.url, eng.served_model, wl,
                                                tokenizer_path=str(demo)))  # fmt: skip
                row = {"engine": {"max-num-seqs": seqs, "max-num-batched-tokens": mbt},
                       "workload": wl.to_dict(), "repeat": rep,
                       "results": {k: res.metrics.get(k) for k in KEYS},
                       "server": {"mean_itl_ms": res.server.mean_itl_ms}}  # fmt: skip
                out.append(row)
                print(json.dumps({"seqs": seqs, "mbt": mbt, "conc": conc, **row["results"],
                                  "server_itl_ms": res.server.mean_itl_ms}),
                      flush=True)  # fmt: skip
                args.out.write_text(json.dumps(out, indent=1))
        finally:
            runner.stop()


if __name__ == "__main__":
    main()
