"""Wall time of a study on 1, 2, 4 and 8 GPU slots: does the scheduler keep every slot busy?

Runs, for each slot count, an 8-point sweep (``max-num-seqs`` over 8 values)
and a 3+3 A/B through the real study code (``tuner.studies``: TrialRunner,
GpuPool, run_parallel, the trial runner, the benchmark client), with the
study engine double (tests/support/study_engine_double.py) as the engine:
it sleeps ``--startup`` seconds before listening, like an engine loading
weights, and its speed varies from launch to launch by a log-normal factor
(``--noise``). The GPUs are fake: ``TUNELAB_FORCE_GPU_COUNT`` sets how many
the node has, the scheduler pins each engine with CUDA_VISIBLE_DEVICES as on
a GPU node, and the double ignores it. Printed: wall seconds and the ratio to
the 1-slot time; for the A/B also the wall time in launch-times (a launch-time
is the 1-slot A/B's wall time / 6: one trial's whole cost in sequence, engine
start to engine stop and the study's bookkeeping), and the median per-trial
start / measured-run / stop seconds.

Goals (issue 15): sweep on 8 slots <= 0.2x; A/B in <= 1.3 launch-times on >= 6 slots.

Run: ``.venv/bin/python benchmarks/study_speed.py`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.study_cli import double_command  # noqa: E402
from tuner.bench.workload import Workload  # noqa: E402
from tuner.config import EngineConfig  # noqa: E402
from tuner.rules import Target  # noqa: E402
from tuner.studies.ab import run_ab  # noqa: E402
from tuner.studies.executor import TrialRunner  # noqa: E402
from tuner.studies.space import parse_param  # noqa: E402
from tuner.studies.sweep import run_sweep  # noqa: E402
from tuner.trials.context import RunContext  # noqa: E402
from tuner.trials.slots import FORCE_ENV  # noqa: E402
from tuner.trials.store import TrialStore  # noqa: E402

SWEEP = "max-num-seqs=1,2,3,4,5,6,7,8"


def _runner(store: TrialStore) -> TrialRunner:
    context = RunContext(Target(note="study engine double: catalogue rules"), None, [])
    options = {"startup_timeout": 120.0, "context": context}
    return TrialRunner(store, None, options, command_for=double_command)


async def _sweep(store: TrialStore, workload: Workload) -> float:
    started = time.monotonic()
    report = await run_sweep(
        EngineConfig(model="engine-double"), workload, [parse_param(SWEEP)], _runner(store)
    )
    wall = time.monotonic() - started
    measured = sum(len(p.trials) for s in report.steps for p in s.points)
    assert measured == 8, f"sweep measured {measured} points"
    return wall


async def _ab(store: TrialStore, workload: Workload) -> tuple[float, float]:
    a = EngineConfig(model="engine-double", engine={"max-num-seqs": 2})
    b = EngineConfig(model="engine-double", engine={"max-num-seqs": 8})
    started = time.monotonic()
    report = await run_ab(a, b, workload, _runner(store), repeats=3)
    wall = time.monotonic() - started
    trials = [store.get(i) for ids in report.trials.values() for i in ids]
    assert len(trials) == 6, report.trials
    for key in ("start_s", "bench_s", "stop_s"):
        values = sorted(t.timings.get(key, 0.0) for t in trials)
        print(f"    median {key}: {values[len(values) // 2]:.1f}", flush=True)
    return wall, wall / len(trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startup", type=float, default=4.0, help="engine start-up seconds")
    parser.add_argument("--noise", type=float, default=0.05, help="launch-to-launch sigma")
    parser.add_argument("--slots", default="1,2,4,8", help="slot counts to measure")
    args = parser.parse_args()
    os.environ["DOUBLE_STARTUP_S"] = str(args.startup)
    os.environ["DOUBLE_NOISE"] = str(args.noise)
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    os.environ.pop("HIP_VISIBLE_DEVICES", None)
    workload = Workload(
        input_len=16, output_len=32, num_prompts=16, concurrency=8, warmup_requests=0
    )
    # (slots, sweep wall, A/B wall, A/B wall per trial); row 0 must be 1 slot.
    rows: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TUNELAB_HOME"] = tmp
        for n in (int(x) for x in args.slots.split(",")):
            os.environ[FORCE_ENV] = str(n)
            with TrialStore(Path(tmp) / f"s{n}.db") as store:
                sweep = asyncio.run(_sweep(store, workload))
                ab, launch = asyncio.run(_ab(store, workload))
            rows.append((n, sweep, ab, launch))
            print(f"  {n} slot(s): sweep {sweep:.1f} s, A/B {ab:.1f} s", flush=True)
    base_sweep, base_ab, launch = rows[0][1], rows[0][2], rows[0][3]
    print(f"\nengine start-up {args.startup:.1f} s, launch noise {args.noise:.0%}; fake GPUs")
    print(
        f"{'slots':>5} {'sweep s':>8} {'x 1-slot':>8} {'A/B s':>7} {'x 1-slot':>8} {'launches':>9}"
    )
    for n, sweep, ab, _ in rows:
        print(
            f"{n:>5} {sweep:>8.1f} {sweep / base_sweep:>8.2f} {ab:>7.1f} {ab / base_ab:>8.2f} "
            f"{ab / launch:>9.2f}"
        )


if __name__ == "__main__":
    main()
