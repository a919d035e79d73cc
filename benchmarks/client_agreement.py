"""Do tunelab's client and `vllm bench serve` read the same engine the same way?

Starts the real vLLM CPU engine on the tiny model, then runs clients against
it in the order given by ``--plan`` (O: ``tunelab bench`` as a process, T:
vLLM's client through tests/support/vllm_bench_serve.py, N: tunelab's
``run_benchmark`` with /metrics scraping off), 96 prompts of 128 tokens,
32 out, 20 requests/s, at most 8 in flight, no warm-ups. For each run it
prints the client's mean TTFT, TPOT, ITL and E2E beside the engine's own
means for the same requests (the ``_sum``/``_count`` deltas of vLLM's
histograms, read right before and after the run), the client's excess over
the engine, and the engine's prefix-cache hits in the run.

``--prompts random`` gives each client its own random workload (vLLM's
``random`` dataset, tunelab's ``--text-prompts``): this is how the
first version of tests/test_bench_engine.py compared them, and it shows the
two workloads differ in prefix-cache hits. ``--prompts shared`` sends both the
same ShareGPT-format file. ``--isolate`` runs the clients and the API server
on the cores vLLM's worker does not use and pins the EngineCore beside the
worker (tests.support.engine_reference.client_cores): without it, on a
2-core box the EngineCore's busy-polling makes both clients' TTFT excess
jump between +3 and +370 ms from run to run. Figures quoted in
docs/production.md and the README came from (before ``--isolate`` existed)::

    .venv/bin/python benchmarks/client_agreement.py --prompts random --plan OTOTOTOTOTOT
    .venv/bin/python benchmarks/client_agreement.py --prompts shared --plan ONTONTONTONT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.engine_reference import (  # noqa: E402
    ENGINE_HISTOGRAMS,
    client_cores,
    engine_page,
    write_shared_prompts,
)
from tests.support.engine_thread import EngineThread  # noqa: E402
from tests.support.vllm_bench_serve import run_vllm_bench  # noqa: E402
from tuner.bench import Workload, run_benchmark  # noqa: E402
from tuner.bench.host_noise import local_server_pids  # noqa: E402
from tuner.config import EngineConfig  # noqa: E402
from tuner.cpu_demo import DEMO_ENGINE_ARGS  # noqa: E402
from tuner.demo_model import ensure_demo_model  # noqa: E402
from tuner.engine import EngineSpec  # noqa: E402

PROMPTS, IN, OUT = 96, 128, 32
COUNTERS = ("vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total")


def _commands(url: str, served: str, model: Path, shared: Path | None) -> dict[str, list[str]]:
    pace = ["--request-rate", "20", "--burstiness", "4"]
    if shared is None:
        theirs_data = ["--dataset-name", "random", "--random-input-len", str(IN),
                       "--random-output-len", str(OUT)]  # fmt: skip
        ours_data = ["--text-prompts", "--input-len", str(IN)]
    else:
        theirs_data = ["--dataset-name", "sharegpt", "--dataset-path", str(shared),
                       "--sharegpt-output-len", str(OUT)]  # fmt: skip
        ours_data = ["--dataset", str(shared), "--dataset-kind", "sharegpt"]
    theirs = ["--base-url", url, "--model", served, "--tokenizer", str(model), *theirs_data,
              "--num-prompts", str(PROMPTS), "--max-concurrency", "8", *pace,
              "--num-warmups", "0", "--ready-check-timeout-sec", "0", "--ignore-eos",
              "--extra-body", json.dumps({"min_tokens": OUT}), "--disable-tqdm",
              "--percentile-metrics", "ttft,tpot,itl,e2el"]  # fmt: skip
    ours = ["bench", "--url", url, "--model", served, "--tokenizer", str(model), *ours_data,
            "--output-len", str(OUT), "--num-prompts", str(PROMPTS), "--concurrency", "8",
            *pace, "--warmup", "0", "--json"]  # fmt: skip
    return {"T": theirs, "O": ours}


def _run(kind: str, cmds: dict[str, list[str]], url: str, served: str, model: Path,
         shared: Path | None, cores: set[int] | None) -> dict:  # fmt: skip
    if kind == "T":
        return run_vllm_bench(cmds["T"], cores, timeout_s=300)
    if kind == "O":
        pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        proc = subprocess.run([sys.executable, "-m", "tui", *cmds["O"]], capture_output=True,
                              text=True, cwd=REPO, timeout=300, check=True,
                              preexec_fn=pin)  # fmt: skip
        return json.loads(proc.stdout)
    wl = Workload(input_len=IN, output_len=OUT, num_prompts=PROMPTS, concurrency=8,
                  request_rate=20.0, burstiness=4.0, warmup_requests=0, text_prompts=shared is None,
                  dataset_path=str(shared) if shared else None)  # fmt: skip
    result = asyncio.run(run_benchmark(url, served, wl, tokenizer_path=str(model),
                                       metrics_interval_s=1e9))  # fmt: skip
    return result.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", choices=("random", "shared"), default="shared")
    parser.add_argument("--plan", default="OTOTOT", help="O tunelab, T vLLM, N tunelab unscraped")
    parser.add_argument("--isolate", action="store_true", help="clients off the engine's cores")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tunelab-agree-"))
    os.environ["TUNELAB_HOME"] = str(home)
    model = ensure_demo_model()
    spec = EngineSpec(config=EngineConfig(model=str(model), engine=dict(DEMO_ENGINE_ARGS)),
                      log_path=home / "engine.log", startup_timeout=600)  # fmt: skip
    runner = EngineThread(spec)
    eng = runner.start()
    stack = contextlib.ExitStack()
    try:
        shared = (
            write_shared_prompts(model, home / "prompts.json", PROMPTS, IN, OUT)
            if args.prompts == "shared"
            else None
        )
        cmds = _commands(eng.url, eng.served_model, model, shared)
        _run("O", cmds, eng.url, eng.served_model, model, shared, None)  # prime the engine
        cores = None
        if args.isolate:
            cores = stack.enter_context(client_cores(local_server_pids(eng.url)))
        if cores:  # N runs in this process
            os.sched_setaffinity(0, cores)
        print(f"prompts: {args.prompts}; clients on cores {sorted(cores) if cores else 'shared'};"
              " client mean / engine mean (client excess), ms")  # fmt: skip
        for kind in args.plan:
            before = engine_page(eng.url)
            res = _run(kind, cmds, eng.url, eng.served_model, model, shared, cores)
            after = engine_page(eng.url)
            cells = []
            for key, name in ENGINE_HISTOGRAMS.items():
                n = sum(after[f"{name}_count"]) - sum(before[f"{name}_count"])
                engine_ms = 1000 * (sum(after[f"{name}_sum"]) - sum(before[f"{name}_sum"])) / n
                ours = res[f"mean_{key}_ms"]
                cells.append(f"{key} {ours:6.2f}/{engine_ms:6.2f} ({ours - engine_ms:+6.2f})")
            hits, prompt = (sum(after[c]) - sum(before[c]) for c in COUNTERS)
            print(f"{kind}  " + "  ".join(cells) + f"  prefix hits {hits:.0f}/{prompt:.0f}")
    finally:
        stack.close()
        runner.stop()


if __name__ == "__main__":
    main()
