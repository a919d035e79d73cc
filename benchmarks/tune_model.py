"""Launches a `tune` under an SLO spends to reach its winner, with and without the study model.

Issue 31: once 4 trials like a candidate are measured, the search does not launch a point the
study model is sure misses the SLO (tuner.studies.search_skip), and launches first the point
the model predicts beats every measured one under the SLO (tuner.studies.search_propose). This
runs the same search
(the product's run_search, trial runner and store, Optuna seeded alike) twice per seed —
``--no-skip``, then with the model — on the study engine double (a token gap per step;
requests beyond max-num-seqs queue for a whole generation, so a concurrency above
max-num-seqs breaks a tight TTFT bound), and prints per seed: the best feasible point each
found, the launches each spent until its first launch within ``--within`` of the better of
the two bests (the winner "within noise"; a search that never got there within its budget
counts ``--launches`` + 1), the points the model did not launch and those it proposed.

    .venv/bin/python benchmarks/tune_model.py [--seeds 0,1,2,3,4] [--launches 20]

``--engine cpu`` runs the same pair on the real vLLM CPU engine on the demo model (each
launch a real engine start, laid out as every CPU trial is); run it under the engine lock::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/tune_model.py --engine cpu \
        --seeds 0 --launches 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.study_cli import double_command  # noqa: E402
from tuner.bench.workload import Workload  # noqa: E402
from tuner.config import EngineConfig  # noqa: E402
from tuner.rules import Target  # noqa: E402
from tuner.studies.common import meets, value_of  # noqa: E402
from tuner.studies.executor import TrialRunner  # noqa: E402
from tuner.studies.search import run_search  # noqa: E402
from tuner.studies.search_propose import PROPOSE_TAG  # noqa: E402
from tuner.studies.search_skip import is_model_skip  # noqa: E402
from tuner.studies.space import Space, parse_constraint, parse_param  # noqa: E402
from tuner.trials.context import RunContext  # noqa: E402
from tuner.trials.model import TrialStatus  # noqa: E402
from tuner.trials.store import TrialStore  # noqa: E402

OBJECTIVE = "output_throughput"


def arm(args: argparse.Namespace, seed: int, skip: bool) -> tuple[list, list, list]:
    """One search: (launched trials in order, model-skipped trials, model-proposed trials)."""
    home = Path(os.environ["TUNELAB_HOME"])
    name = f"tune-{seed}-{'model' if skip else 'plain'}"
    space = Space([parse_param(p) for p in args.param],
                  constraints=[parse_constraint(args.slo)])  # fmt: skip
    cpu = args.engine == "cpu"
    base = Workload(input_len=128 if cpu else 16, output_len=32 if cpu else 16,
                    num_prompts=args.prompts, warmup_requests=2 if cpu else 0)  # fmt: skip
    with TrialStore(home / "trials.db") as store:
        if store.list(study=name):  # --home of an earlier run: read, not rerun
            trials = sorted(store.list(study=name), key=lambda t: t.created_at)
            launched = [t for t in trials if t.status is not TrialStatus.SKIPPED]
            proposed = [t for t in launched if PROPOSE_TAG in t.tags]
            return launched, [t for t in trials if is_model_skip(t)], proposed
        if cpu:
            from tuner.cpu_demo import demo_config

            config = demo_config()
            runner = TrialRunner(store, None, {"startup_timeout": 600, "guard": False})
        else:
            config = EngineConfig(model="engine-double")
            context = RunContext(Target(note="study engine double"), None, [])
            runner = TrialRunner(store, None, {"startup_timeout": 60, "context": context,
                                               "guard": False}, double_command)  # fmt: skip
        asyncio.run(run_search(config, base, space, runner,
                               n_trials=args.launches, study=name, seed=seed,
                               storage=f"sqlite:///{home / 'optuna.db'}", prune=False,
                               skip=skip))  # fmt: skip
        trials = sorted(store.list(study=name), key=lambda t: t.created_at)
    launched = [t for t in trials if t.status is not TrialStatus.SKIPPED]
    proposed = [t for t in launched if PROPOSE_TAG in t.tags]
    return launched, [t for t in trials if is_model_skip(t)], proposed


def best(trials: list, constraints: list) -> tuple[float, str]:
    feasible = [(value_of(t, OBJECTIVE) or 0.0, t) for t in trials if meets(t, constraints)]
    if not feasible:
        return 0.0, "-"
    value, t = max(feasible, key=lambda vt: vt[0])
    return value, " ".join(f"{k}={v}" for k, v in t.tags["values"].items())


def to_reach(trials: list, constraints: list, target: float) -> int | None:
    for i, t in enumerate(trials, 1):
        if meets(t, constraints) and (value_of(t, OBJECTIVE) or 0.0) >= target:
            return i
    return None


def winning_point(trials: list, constraints: list) -> str | None:
    """The point with the best mean over its launches that met the SLO (noise averaged)."""
    by_point: dict[str, list[float]] = {}
    for t in trials:
        if meets(t, constraints):
            by_point.setdefault(label(t), []).append(value_of(t, OBJECTIVE) or 0.0)
    if not by_point:
        return None
    return max(by_point, key=lambda k: statistics.fmean(by_point[k]))


def to_launch(trials: list, point: str | None) -> int | None:
    """Launches until the first launch of ``point``, whatever that one launch measured."""
    return next((i for i, t in enumerate(trials, 1) if label(t) == point), None)


def label(trial) -> str:
    return " ".join(f"{k}={v}" for k, v in trial.tags["values"].items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("double", "cpu"), default="double")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--launches", type=int, default=20, help="the search's --trials")
    ap.add_argument("--param", action="append", default=None)
    ap.add_argument("--slo", default=None)
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--within", type=float, default=0.05, help="the winner's noise band")
    ap.add_argument("--home", default=None,
                    help="the TUNELAB_HOME to use; a search already stored there is read back, "
                    "not rerun (re-read an earlier run's figures)")  # fmt: skip
    args = ap.parse_args()
    cpu = args.engine == "cpu"
    args.param = args.param or (
        ["max-num-seqs=2,8,32", "concurrency=4,16,64"]
        if cpu
        else ["max-num-seqs=1,2,4,8,16,32", "concurrency=1,2,4,8,16,32"]
    )
    args.slo = args.slo or ("p99_ttft_ms<=500" if cpu else "p99_ttft_ms<=100")
    args.prompts = args.prompts or (64 if cpu else 32)
    os.environ["TUNELAB_HOME"] = args.home or tempfile.mkdtemp(prefix="tunelab-tunemodel-")
    print(f"TUNELAB_HOME={os.environ['TUNELAB_HOME']}")
    os.environ.setdefault("DOUBLE_TOKEN_MS", "10")
    constraints = [parse_constraint(args.slo)]
    print(f"{'CPU engine, demo model' if cpu else 'study engine double'} · {' × '.join(args.param)} · SLO {args.slo} · "
          f"{args.launches} launches per search · {args.prompts} prompts")  # fmt: skip
    print("\n| seed | best plain | best model | launches to the winner plain / model "
          "| to the winning point plain / model | not launched / proposed (model) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    reach: dict[bool, list[int]] = {False: [], True: []}
    first: dict[bool, list[int]] = {False: [], True: []}
    for seed in (int(s) for s in args.seeds.split(",")):
        plain, _, _ = arm(args, seed, skip=False)
        guided, skipped, proposed = arm(args, seed, skip=True)
        (pv, pp), (gv, gp) = best(plain, constraints), best(guided, constraints)
        target = max(pv, gv) * (1 - args.within)
        a, b = to_reach(plain, constraints, target), to_reach(guided, constraints, target)
        reach[False].append(a or args.launches + 1)
        reach[True].append(b or args.launches + 1)
        # The winning point: the best mean over both searches' launches of it that met the SLO.
        win = winning_point(plain + guided, constraints)
        c, d = to_launch(plain, win), to_launch(guided, win)
        first[False].append(c or args.launches + 1)
        first[True].append(d or args.launches + 1)
        print(f"| {seed} | {pp} ({pv:,.0f} tok/s) | {gp} ({gv:,.0f} tok/s) | "
              f"{a or f'>{args.launches}'} / {b or f'>{args.launches}'} | "
              f"{c or f'>{args.launches}'} / {d or f'>{args.launches}'} | "
              f"{len(skipped)} / {len(proposed)} |", flush=True)  # fmt: skip
    a, b = statistics.median(reach[False]), statistics.median(reach[True])
    print(
        f"\nmedian launches to the winner: plain {a:g}, model {b:g} "
        f"({1 - b / a:.0%} fewer; a search that never reached it counts {args.launches + 1})"
    )
    print(
        f"sum over seeds: plain {sum(reach[False])}, model {sum(reach[True])} "
        f"({1 - sum(reach[True]) / sum(reach[False]):.0%} fewer)"
    )
    c, d = statistics.median(first[False]), statistics.median(first[True])
    print(
        f"median launches to the first launch of the winning point: plain {c:g}, model {d:g} "
        f"({1 - d / c:.0%} fewer; sum {sum(first[False])} -> {sum(first[True])})"
    )


if __name__ == "__main__":
    main()
