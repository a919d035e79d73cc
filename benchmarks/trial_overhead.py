"""The tuner's own cost per trial, and how fast an engine crash fails a trial.

Runs short trials on the real vLLM CPU engine (the demo model) and prints,
as medians over the runs:

* overhead per trial: run_trial's wall time minus the engine's start-up
  (launch to healthy), minus the benchmark's wall time, minus the engine's
  own teardown (vLLM's graceful shutdown) — i.e. what tunelab itself adds:
  rules check, store commits, process bookkeeping, event plumbing (goal < 1 s);
* crash to failed: SIGKILL of an engine process (EngineCore, then a worker)
  during the measured run until the trial is committed as failed and the
  TrialFailed event fires (goal < 1 s).

Usage (start real engines one at a time machine-wide)::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/trial_overhead.py --runs 3 --crash-runs 2

``--double`` uses the engine double of the tests instead of vLLM (seconds
instead of minutes; the crash then kills the double's only process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _double_command(plan: dict[str, float]) -> list[str]:
    text = json.dumps(plan).replace("{", "{{").replace("}", "}}")
    return [sys.executable, "-m", "tests.support.engine_double", "--port", "{port}", "--plan", text]


def _config(double: bool):
    from tuner.config import EngineConfig
    from tuner.cpu_demo import demo_config

    return EngineConfig(model="stub-model") if double else demo_config()


async def overhead_run(store, double: bool) -> dict[str, float]:
    from tuner.bench.workload import Workload
    from tuner.trials.model import Trial
    from tuner.trials.runner import run_trial

    wl = Workload(input_len=32, output_len=16, num_prompts=16, concurrency=4, warmup_requests=2)
    trial = Trial(_config(double), wl, study="overhead")
    kwargs = (
        {"engine_command": _double_command({"ttft_ms": 5, "itl_ms": 2}), "engine_cwd": str(REPO)}
        if double
        else {}
    )
    await run_trial(trial, store, **kwargs)
    if trial.status.value != "done":
        raise SystemExit(f"trial {trial.id} {trial.status}: {trial.failure_reason}")
    t = trial.timings
    startup = trial.startup_seconds or 0.0
    return {
        "total_s": t["total_s"],
        "startup_s": startup,
        "bench_s": t["bench_s"],
        "stop_s": t["stop_s"],
        "rules_s": t["rules_s"],
        "spawn_bookkeeping_s": t["start_s"] - startup,
        "overhead_s": t["total_s"] - startup - t["bench_s"] - t["stop_s"],
    }


async def crash_run(store, double: bool, victim: str) -> dict[str, object]:
    import psutil

    from tuner.bench.workload import Workload
    from tuner.engine import proctree
    from tuner.trials.events import TrialFailed, TrialProgress
    from tuner.trials.model import Trial
    from tuner.trials.runner import run_trial

    wl = Workload(input_len=32, output_len=256, num_prompts=64, concurrency=4)
    trial = Trial(_config(double), wl, study="crash")
    marks: dict[str, object] = {}
    kwargs = (
        {"engine_command": _double_command({"ttft_ms": 5, "itl_ms": 20}), "engine_cwd": str(REPO)}
        if double
        else {}
    )

    def on_event(event: object) -> None:
        if isinstance(event, TrialProgress) and "kill" not in marks and event.progress.done >= 1:
            root = trial.engine_pid
            assert root is not None
            pids = {r.pid for r in proctree.tree(root, root)}
            marks["tree"] = pids
            target = root
            for pid in pids:
                try:
                    if psutil.Process(pid).name().startswith(victim):
                        target = pid
                except psutil.Error:
                    continue
            marks["victim"] = psutil.Process(target).name()
            os.kill(target, signal.SIGKILL)
            marks["kill"] = time.monotonic()
        elif isinstance(event, TrialFailed):
            marks["failed"] = time.monotonic()

    # Instrumentation (this script only): when the runner's watch first saw the death.
    from tuner.trials import runner as runner_mod

    original = runner_mod._Session.dead_member

    def dead_member(session):
        found = original(session)
        if found is not None and "kill" in marks and "noticed" not in marks:
            marks["noticed"] = time.monotonic()
        return found

    runner_mod._Session.dead_member = dead_member  # type: ignore[method-assign]
    try:
        await run_trial(trial, store, on_event=on_event, **kwargs)
    finally:
        runner_mod._Session.dead_member = original  # type: ignore[method-assign]
    if "kill" not in marks or "failed" not in marks:
        raise SystemExit(f"crash run did not go as planned: {trial.status} {trial.failure_reason}")
    left = proctree.alive({r for pid in marks["tree"] if (r := proctree.ref(pid))})  # type: ignore[union-attr]
    return {
        "victim": marks["victim"],
        "detect_s": float(marks["failed"]) - float(marks["kill"]),  # type: ignore[arg-type]
        "noticed_s": float(marks.get("noticed", marks["failed"])) - float(marks["kill"]),  # type: ignore[arg-type]
        "reason": trial.failure_reason,
        "left": len(left),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3, help="overhead trials")
    ap.add_argument(
        "--crash-runs", type=int, default=2, help="crash trials (EngineCore, then Worker, ...)"
    )
    ap.add_argument("--double", action="store_true", help="use the engine double instead of vLLM")
    ap.add_argument(
        "--victims",
        default="VLLM::EngineCore,VLLM::Worker",
        help="engine processes to SIGKILL in turn (name prefixes)",
    )
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="tunelab-overhead-")
    os.environ["TUNELAB_HOME"] = home
    from tuner.trials.context import engine_entry, resolve_context
    from tuner.trials.store import TrialStore

    store = TrialStore()
    engine = "engine double" if args.double else "vLLM CPU engine (demo model)"
    print(f"tunelab trial overhead — {engine}, store {store.path}")
    t0 = time.monotonic()
    resolve_context(_config(args.double).model)  # introspection + GPU count: once per process
    engine_entry(sys.executable)  # `vllm serve` or `python -m ...`: once per process
    print(
        f"one-off per process: introspection of the installed vLLM and the GPUs: {time.monotonic() - t0:.1f} s"
    )

    rows = []
    for i in range(args.runs):
        row = await overhead_run(store, args.double)
        rows.append(row)
        print(
            f"  run {i + 1}: total {row['total_s']:.2f} s = start-up {row['startup_s']:.2f} + bench "
            f"{row['bench_s']:.2f} + teardown {row['stop_s']:.2f} + tunelab {row['overhead_s']:.3f} s "
            f"(rules {row['rules_s'] * 1000:.1f} ms, spawn/bookkeeping {row['spawn_bookkeeping_s'] * 1000:.0f} ms)"
        )
    if rows:
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"overhead per trial (median of {len(rows)}): {med['overhead_s']:.3f} s "
            f"[goal < 1 s: {'met' if med['overhead_s'] < 1.0 else 'MISSED'}]; "
            f"median start-up {med['startup_s']:.1f} s, bench {med['bench_s']:.2f} s, teardown {med['stop_s']:.2f} s"
        )

    crashes = []
    victims = args.victims.split(",") if not args.double else ["python"]
    for i in range(args.crash_runs):
        victim = victims[i % len(victims)]
        row = await crash_run(store, args.double, victim)
        crashes.append(row)
        print(
            f"  crash {i + 1}: SIGKILL {row['victim']} -> noticed after {row['noticed_s'] * 1000:.0f} ms, "
            f"trial failed (committed) after {row['detect_s'] * 1000:.0f} ms; "
            f"processes left: {row['left']}; reason: {row['reason']}"
        )
    if crashes:
        med = statistics.median(float(r["detect_s"]) for r in crashes)  # type: ignore[arg-type]
        print(
            f"engine crash to trial failed (median of {len(crashes)}): {med * 1000:.0f} ms "
            f"[goal < 1 s: {'met' if med < 1.0 else 'MISSED'}]"
        )
    store.close()


if __name__ == "__main__":
    asyncio.run(main())
