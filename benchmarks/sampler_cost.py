"""CPU cost of the telemetry sampler: 2 Hz over 8 GPUs, FAKE amdsmi backend.

Runs the real :class:`tuner.telemetry.Sampler` (sampler thread plus one
reader thread per GPU) against the recorded-response fake of ``amdsmi`` for
an 8-GPU node, and reports the process CPU time spent over a window of at
least 20 s as a percentage of one core. The goal is under 1 %.

The fake answers from memory, so this measures tunelab's own overhead
(threads, wake-ups, mapping, ring buffers); on a real node the amdsmi calls
themselves (sysfs reads) add to it.

Usage::

    .venv/bin/python benchmarks/sampler_cost.py [--seconds 20] [--rate 2] [--node mi355x]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import fake_amdsmi
from tuner.telemetry.amd import AmdSmiBackend
from tuner.telemetry.sampler import Sampler

GOAL_PERCENT = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window (>= 20)")
    parser.add_argument("--rate", type=float, default=2.0, help="samples per second")
    parser.add_argument("--node", choices=sorted(fake_amdsmi.NODES), default="mi355x")
    args = parser.parse_args()
    if args.seconds < 20:
        parser.error("--seconds must be at least 20 for a stable figure")

    backend = AmdSmiBackend(fake_amdsmi.make_module(args.node))
    backend.open()
    n = backend.count()

    # Cost of the backend mapping alone (no threads): one read of every GPU.
    reps = 200
    c0 = time.process_time()
    for _ in range(reps):
        for i in range(n):
            backend.snapshot(i)
    per_round_ms = (time.process_time() - c0) / reps * 1000

    sampler = Sampler(backend, rate_hz=args.rate, history=120)
    sampler.sample_now()  # start the reader threads outside the measured window
    ticks0 = sampler.ticks
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sampler.start()
    time.sleep(args.seconds)
    sampler.stop()
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    ticks = sampler.ticks - ticks0
    backend.close()

    percent = cpu / wall * 100
    print(f"node: fake {args.node}, {n} GPUs, rate {args.rate:g} Hz")
    print(f"window: {wall:.2f} s wall, {ticks} ticks (expected ~{wall * args.rate:.0f})")
    print(f"process CPU: {cpu * 1000:.1f} ms -> {percent:.3f} % of one core")
    print(f"per tick: {cpu / max(ticks, 1) * 1000:.3f} ms CPU ({n} GPU reads + threads)")
    print(f"mapping only: {per_round_ms:.3f} ms CPU per read of all {n} GPUs")
    verdict = "PASS" if percent < GOAL_PERCENT else "FAIL"
    print(f"goal < {GOAL_PERCENT:g} % of one core: {verdict}")
    return 0 if percent < GOAL_PERCENT else 1


if __name__ == "__main__":
    raise SystemExit(main())
