"""What the output-drift guard costs a trial, on the real vLLM CPU engine.

Runs ``--repeats`` trials of the demo config (the demo model, bfloat16) with
the default workload of ``tunelab run`` (128 in / 128 out, 64 prompts) and
the built-in guard (8 probes x 16 greedy tokens + one teacher-forced pass
each), each trial on its own engine as a study runs them (``--one-engine``:
all on one engine, faster). Prints per trial and as medians:

* guard seconds (``timings["guard_s"]``: the probes' wall time, after the
  measured run, on the same engine);
* that as a share of the trial's measured run (``bench_s``) and of the whole
  trial (``total_s``: engine start to stop);
* each later trial's verdict against the first (the runner teacher-forces the
  first trial's tokens): the same config launched again should be **same**.

Usage (start real engines one at a time machine-wide)::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/guard_cost.py --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


async def run(repeats: int, one_engine: bool, input_len: int, output_len: int, prompts: int):
    from tuner.bench.workload import Workload
    from tuner.cpu_demo import demo_config
    from tuner.trials.model import Trial
    from tuner.trials.runner import run_trial, run_workloads
    from tuner.trials.store import TrialStore

    store = TrialStore()
    config = demo_config()
    wl = Workload(input_len=input_len, output_len=output_len, num_prompts=prompts)
    trials = [Trial(config, wl, study="guard-cost") for _ in range(repeats)]
    if one_engine:
        await run_workloads(trials, store)
    else:
        for t in trials:
            await run_trial(t, store)
    return store, [store.get(t.id) for t in trials]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="trials (>= 3 for a median)")
    parser.add_argument("--one-engine", action="store_true", help="all trials on one engine")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--num-prompts", type=int, default=64)
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 (the figures are medians)")
    home = tempfile.mkdtemp(prefix="tunelab-guard-cost-")
    os.environ.setdefault("TUNELAB_HOME", home)

    from tuner.trials.guard_check import guard_of, trial_verdict

    t0 = time.monotonic()
    store, trials = asyncio.run(
        run(args.repeats, args.one_engine, args.input_len, args.output_len, args.num_prompts)
    )
    wall = time.monotonic() - t0
    with store:
        rows = []
        for i, t in enumerate(trials):
            run_ = guard_of(t)
            if t.results is None or run_ is None:
                print(f"trial {i}: {t.status} ({t.failure_reason}); no guard figures")
                continue
            g, b, total = t.timings["guard_s"], t.timings["bench_s"], t.timings["total_s"]
            verdict = "reference" if i == 0 else trial_verdict(trials[0], t).summary()  # type: ignore[union-attr]
            rows.append((g, g / b, g / total))
            print(
                f"trial {i} {t.short_id}: guard {g:.2f} s ({len(run_.probes)} probes x "
                f"{run_.max_tokens} tokens{'; ' + run_.error if run_.error else ''}), measured run "
                f"{b:.2f} s, trial {total:.1f} s -> guard = {g / b:.1%} of the measured run, "
                f"{g / total:.1%} of the trial; vs trial 0: {verdict}"
            )
    if not rows:
        sys.exit("no trial finished with a guard run")
    med = [statistics.median(col) for col in zip(*rows, strict=True)]
    load = os.getloadavg()
    print(
        f"\nmedian over {len(rows)} trials ({'one engine' if args.one_engine else 'one engine per trial'}, "
        f"workload {args.input_len} in / {args.output_len} out x {args.num_prompts} prompts; "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at the end; {wall:.0f} s wall): "
        f"guard {med[0]:.2f} s per trial = {med[1]:.1%} of the measured run, "
        f"{med[2]:.1%} of the whole trial"
    )


if __name__ == "__main__":
    main()
