"""Simulated A/Bs: does sequential stopping keep its error rate, and how many launches does it save?

Each simulated A/B draws one launch per arm per round from a log-normal
launch-to-launch noise (``value = base * (1 + effect) * exp(N(0, sigma))``,
B carrying the effect) and asks ``tuner.studies.sequential.SequentialMonitor``
— the code ``tunelab ab --max-repeats`` runs — after every round whether to
stop. Printed per noise level:

- the false-win rate at a true effect of 0 (any verdict other than "no
  significant difference"), next to what naive stopping (an unadjusted 95 %
  interval at every look) gives, to show the inflation the design prevents;
- the median and 90th-percentile launches per arm to a verdict at true
  effects of 0 %, 10 %, 20 % and 100 %, and the share of A/Bs that found the
  difference (power) where there is one.

Run: ``.venv/bin/python benchmarks/ab_sequential.py`` (about 3-5 minutes on
one core; ``--sims 300`` for a quick look); ``--spending front --pooled``
for the design that stops a large change at 2 launches per arm.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass

from tuner.studies.sequential import (
    Decision,
    SequentialDesign,
    SequentialMonitor,
    Spending,
    comparison_at,
)
from tuner.studies.stats import Verdict

METRIC = "output_throughput"


@dataclass(frozen=True)
class Outcome:
    """One simulated A/B: launches per arm used, and whether it declared a difference."""

    launches: int
    different: bool
    naive_false_win: bool


def simulate(
    design: SequentialDesign, sigma: float, effect: float, rng: random.Random, *, naive: bool
) -> Outcome:
    """One A/B under ``design``; with ``naive`` also whether 95 %-at-every-look would have stopped wrongly."""
    monitor = SequentialMonitor(design)
    a: list[float] = []
    b: list[float] = []
    naive_hit = False
    for _ in range(design.max_repeats):
        a.append(1000.0 * math.exp(rng.gauss(0.0, sigma)))
        b.append(1000.0 * (1.0 + effect) * math.exp(rng.gauss(0.0, sigma)))
        if naive and not naive_hit and len(a) >= 2:
            naive_hit = comparison_at(METRIC, a, b, 0.05).verdict is not Verdict.NO_DIFFERENCE
        look = monitor.look(METRIC, a, b)
        if look.decision is not Decision.CONTINUE:
            return Outcome(len(a), look.decision is Decision.DIFFERENT, naive_hit)
    return Outcome(len(a), False, naive_hit)


def percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000, help="A/Bs per noise level and effect")
    parser.add_argument("--max-repeats", type=int, default=6, help="launches per arm at most")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--spending", choices=[s.value for s in Spending], default="pocock")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument(
        "--pooled", action="store_true", help="Student's pooled interval instead of Welch's"
    )
    args = parser.parse_args()
    design = SequentialDesign(
        args.max_repeats, args.alpha, Spending(args.spending), pooled=args.pooled
    )
    rng = random.Random(args.seed)
    print(
        f"{args.sims} simulated A/Bs per cell; max {args.max_repeats} launches per arm; "
        f"alpha {args.alpha:.0%}; {args.spending} spending; "
        f"{'pooled' if args.pooled else 'Welch'} intervals; looks after every round from 2 per arm"
    )
    header = (
        f"{'noise':>6} {'effect':>7} {'diff found':>10} {'naive FW':>9} "
        f"{'median/arm':>10} {'p90/arm':>8}"
    )
    print(header)
    for sigma in (0.05, 0.15, 0.30):
        for effect in (0.0, 0.10, 0.20, 1.00):
            runs = [
                simulate(design, sigma, effect, rng, naive=effect == 0.0) for _ in range(args.sims)
            ]
            found = sum(r.different for r in runs) / len(runs)
            naive = (
                f"{sum(r.naive_false_win for r in runs) / len(runs):>8.1%}"
                if effect == 0.0
                else f"{'':>8}"
            )
            launches = [r.launches for r in runs]
            label = "FALSE WIN" if effect == 0.0 else "power"
            print(
                f"{sigma:>6.0%} {effect:>7.0%} {found:>9.1%}  {naive} "
                f"{statistics.median(launches):>10.1f} {percentile(launches, 0.9):>8.0f}"
                f"   ({label})"
            )


if __name__ == "__main__":
    main()
