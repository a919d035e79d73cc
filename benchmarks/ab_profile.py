"""Does profiling an A/B change what it measures, and how much of the difference does it explain?

On the real vLLM CPU engine with the demo model, ``max-num-seqs`` 1 (A) vs 64
(B) at concurrency 32 (the engine test's A/B, a several-fold effect). Each
round launches four engines, interleaved (the order alternates per round so
drift hits every cell alike):

* A and B **plain**: the launch a ``tunelab ab`` without ``--profile`` makes;
* A and B **profiled**: launched with vLLM's torch profiler armed
  (``--profiler-config``) and, after the measured run, a profiled window
  (tuner.profiles.capture) — what ``tunelab ab --profile`` does on each arm's
  first launch, so no launch is added.

Printed: each cell's output throughput and median TPOT per round and as
medians, the profiled/plain ratio per arm (the profile must not touch the
measured figures: 1.0 within the launch-to-launch noise, which the plain
cells' own spread shows), and per round the explanation of B − A by family
from the two profiled launches (``tuner.studies.ab_explain``: the share of the
measured per-token difference the named families account for; the done-when
asks >= 80 %), with the profile window's extra seconds per launch.

Usage (real engines, one at a time machine-wide; ~12-15 min for 3 rounds on 2 cores)::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/ab_profile.py --rounds 3
    .venv/bin/python benchmarks/ab_profile.py --report-only HOME   # reprint a run's figures
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CELLS = (("A", False), ("A", True), ("B", False), ("B", True))


def _order(round_no: int) -> list[tuple[str, bool]]:
    """A plain, A profiled, B plain, B profiled — reversed every other round."""
    return list(CELLS) if round_no % 2 == 0 else list(reversed(CELLS))


async def run(rounds: int) -> list[Any]:
    from tuner.bench.workload import Workload
    from tuner.cpu_demo import demo_config
    from tuner.profiles.record import CAPTURE, PROFILE_TAG
    from tuner.studies.executor import TrialRunner
    from tuner.trials.model import Trial
    from tuner.trials.store import TrialStore

    load = Workload(input_len=32, output_len=32, num_prompts=32, concurrency=32, warmup_requests=32)
    base = demo_config()
    configs = {
        "A": base.with_values({"max-num-seqs": 1}),
        "B": base.with_values({"max-num-seqs": 64}),
    }
    runner = TrialRunner(TrialStore(), options={"startup_timeout": 600.0, "guard": False})
    done: list[Any] = []
    for r in range(rounds):
        for arm, profiled in _order(r):
            trial = Trial(
                configs[arm],
                load,
                study="bench-ab-profile",
                arm=arm,
                repeat=r,
                tags={"kind": "bench", "cell": f"{arm}{'+p' if profiled else ''}"}
                | ({PROFILE_TAG: CAPTURE} if profiled else {}),
            )
            finished = await runner.one(trial)
            res = finished.results or {}
            print(
                f"round {r + 1} {arm} {'profiled' if profiled else 'plain   '}: "
                f"{finished.status} {res.get('output_throughput', float('nan')):8.1f} tok/s, "
                f"median TPOT {res.get('median_tpot_ms', float('nan')):6.2f} ms, "
                f"profile {finished.timings.get('profile_s', 0.0):5.1f} s",
                flush=True,
            )
            done.append(finished)
    return done


def report(trials: list[Any]) -> None:
    from tuner.studies.ab_explain import arms_explanation
    from tuner.studies.stats import compare, format_relative

    def values(arm: str, profiled: bool, key: str) -> list[float]:
        return [
            float(t.results[key])
            for t in trials
            if t.arm == arm and (t.profile is not None) == profiled and t.results
        ]

    print("\n== measured figures: profiled vs plain launches (interval as tunelab ab's) ==")
    for key in ("output_throughput", "median_tpot_ms"):
        for arm in "AB":
            plain, prof = values(arm, False, key), values(arm, True, key)
            if len(plain) < 2 or len(prof) < 2:
                continue
            row = compare(key, plain, prof)  # "B" here is the profiled launches
            print(
                f"{key:18s} {arm}: plain {statistics.median(plain):9.2f} "
                f"(runs {', '.join(f'{v:.1f}' for v in plain)}), profiled "
                f"{statistics.median(prof):9.2f} (runs {', '.join(f'{v:.1f}' for v in prof)}); "
                f"profiled vs plain {format_relative(row)}: {row.verdict}"
            )
    print("\n== why B is faster, per round (the round's two profiled launches) ==")
    shares = []
    for r in sorted({t.repeat for t in trials}):
        arms = {a: [t for t in trials if t.arm == a and t.repeat == r and t.profile] for a in "AB"}
        found = arms_explanation(arms)
        if found is None:
            continue
        print(f"round {r + 1}: {found.summary()}")
        if found.explanation and found.explanation.explained_share is not None:
            shares.append(found.explanation.explained_share)
    if shares:
        print(
            f"explained share: median {statistics.median(shares):.0%} (rounds: "
            f"{', '.join(f'{s:.0%}' for s in shares)})"
        )
    windows = [t.timings["profile_s"] for t in trials if "profile_s" in t.timings]
    if windows:
        print(
            f"profile window + trace read per profiled launch: {', '.join(f'{w:.1f}' for w in windows)} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--report-only", metavar="HOME", help="Print the report of an earlier run's TUNELAB_HOME."
    )
    args = parser.parse_args()
    if args.report_only:
        os.environ["TUNELAB_HOME"] = args.report_only
        from tuner.trials.store import TrialStore

        with TrialStore() as store:
            report(store.list("bench-ab-profile"))
        return
    os.environ.setdefault("TUNELAB_HOME", tempfile.mkdtemp(prefix="tunelab-bench-profile-"))
    print(f"TUNELAB_HOME={os.environ['TUNELAB_HOME']}", flush=True)
    report(asyncio.run(run(args.rounds)))


if __name__ == "__main__":
    main()
