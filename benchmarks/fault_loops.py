"""Fault loops with figures: random SIGKILLs of a study, engine deaths, hostile inputs.

Run from the repository root:

    .venv/bin/python benchmarks/fault_loops.py      # 50 + 20 kills, 10 engine deaths, corpus
    .venv/bin/python benchmarks/fault_loops.py --kills 200 --tune-kills 50 --deaths 30
    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/fault_loops.py --real-kills 2

What it does, each part with tunelab's real code (store, recovery, studies'
runner, trial runner, reaper, export CLI) and, where the engine itself is not
under test, the fast engine doubles from ``tests/support``:

1. Kill loops: ``tests/support/fault_killloop.py`` SIGKILLs a running study at
   random moments ``--kills`` times, restarts it each time and audits;
   ``tests/support/fault_tuneloop.py`` does the same ``--tune-kills`` times
   to ``tunelab tune`` (Optuna, resumable) and audits both stores.
2. Engine deaths: a trial on the double with vLLM's process shape
   (``tests/support/fault_engine.py``); its ``VLLM::EngineCore`` or
   ``VLLM::Worker`` is SIGKILLed mid-benchmark; measured: time until the
   trial is failed, and leftovers.
3. Real kills (``--real-kills``, opt-in, needs the CPU engine and the lock):
   ``tunelab run`` on the demo model is SIGKILLed at a random point of the
   engine's start-up or measured run; audited like the kill loop.
4. Hostile inputs: the preset corpus (``tests/support/fault_corpus.py``)
   through ``tunelab export`` with the scripts executed under stand-ins, and
   the bad CLI values of ``tests/support/fault_cli.py``.

Prints the figures the README quotes; exits 1 if any must-be-zero figure is not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def kill_loop_part(kills: int, seed: int, work: Path) -> dict:
    from tests.support.fault_killloop import timed_kill_loop

    figures, wall = timed_kill_loop(work / "kill-loop", kills, seed=seed, points=6)
    return {
        "faults_injected": figures.faults,
        "restarts": figures.restarts,
        "studies": figures.studies,
        "trials_completed": figures.completed,
        "trials_interrupted_and_recovered": figures.recovered,
        "trials_lost": figures.lost,
        "orphan_processes": figures.orphans,
        "store_open_failures": figures.store_errors,
        "duplicate_points": figures.duplicates,
        "missing_points": figures.missing_points,
        "left_active": figures.stuck_active,
        "wall_s": round(wall, 1),
        "notes": figures.notes,
    }


def tune_loop_part(kills: int, seed: int, work: Path) -> dict:
    from tests.support.fault_tuneloop import tune_kill_loop

    t0 = time.monotonic()
    figures = tune_kill_loop(work / "tune-loop", kills, seed=seed)
    return {
        "faults_injected": figures.faults,
        "restarts": figures.restarts,
        "trials_completed": figures.completed,
        "optuna_complete": figures.optuna_complete,
        "trials_lost": figures.lost,
        "completed_but_dropped_from_study": figures.dropped,
        "inconsistent": figures.inconsistent,
        "orphan_processes": figures.orphans,
        "store_open_failures": figures.store_errors,
        "wall_s": round(time.monotonic() - t0, 1),
        "notes": figures.notes,
    }


async def _one_death(which: str, work: Path, marker: str) -> tuple[float | None, str, int]:
    from tests.support import fault_procs
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.rules import Target
    from tuner.trials.context import RunContext
    from tuner.trials.events import TrialFailed, TrialProgress
    from tuner.trials.model import Trial
    from tuner.trials.runner import run_trial
    from tuner.trials.store import TrialStore

    record = work / f"pids-{time.monotonic_ns()}.jsonl"
    state: dict = {}

    def on_event(event: object) -> None:
        if isinstance(event, TrialProgress) and "killed" not in state:
            pids = json.loads(record.read_text().splitlines()[-1])
            os.kill(pids[which], 9)
            state["killed"] = time.monotonic()
        elif isinstance(event, TrialFailed) and "killed" in state and "failed" not in state:
            state["failed"] = time.monotonic()

    config = EngineConfig(
        model="engine-double", env={"DOUBLE_TOKEN_MS": "5"}, engine={"max-num-seqs": 4}
    )
    workload = Workload(input_len=8, output_len=200, num_prompts=16, concurrency=4)
    store = TrialStore(work / "deaths.db")
    trial = Trial(config=config, workload=workload, study="deaths")
    await run_trial(
        trial,
        store,
        on_event=on_event,
        context=RunContext(Target(note="catalogue"), None, []),
        engine_command=fault_procs.fault_engine_command(config, record=record),
        engine_cwd=str(fault_procs.REPO),
    )
    store.close()
    left = fault_procs.wait_untagged(marker, 5.0)
    fault_procs.kill_all(left)
    delay = state["failed"] - state["killed"] if "failed" in state and "killed" in state else None
    return delay, str(trial.status), len(left)


def deaths_part(count: int, work: Path) -> dict:
    from tests.support import fault_procs

    marker = fault_procs.new_marker()
    os.environ[fault_procs.MARKER] = marker
    delays, failed, orphans, missed = [], 0, 0, 0
    for i in range(count):
        which = "core" if i % 2 == 0 else "worker"
        delay, status, left = asyncio.run(_one_death(which, work, marker))
        orphans += left
        if status == "failed":
            failed += 1
        if delay is None:
            missed += 1
        else:
            delays.append(delay)
    os.environ.pop(fault_procs.MARKER, None)
    return {
        "faults_injected": count,
        "trials_failed_with_reason": failed,
        "crash_not_reported": missed,
        "detect_ms_median": round(statistics.median(delays) * 1000, 1) if delays else None,
        "detect_ms_max": round(max(delays) * 1000, 1) if delays else None,
        "over_1s": sum(1 for d in delays if d >= 1.0),
        "orphan_processes": orphans,
    }


def _last_status(db: Path) -> str:
    from tuner.trials.store import TrialStore

    if not db.exists():
        return "no trial yet"
    with TrialStore(db) as store:
        trials = store.list()
    return str(trials[-1].status) if trials else "no trial yet"


def real_kills_part(count: int, seed: int, work: Path) -> dict:
    """SIGKILL ``tunelab run`` (real CPU engine) during start-up or the measured run, alternately.

    Even rounds kill at a random moment of the engine's start-up (after its
    API server process exists); odd rounds wait until the store says
    ``measuring`` and kill 0-2 s later. Then: orphans, the store, recovery.
    """
    from tests.support import fault_procs
    from tuner.trials.store import TrialStore

    rng = random.Random(seed)
    marker = fault_procs.new_marker()
    home = work / "real-home"
    env = {**os.environ, "TUNELAB_HOME": str(home), fault_procs.MARKER: marker}
    db = home / "data" / "tunelab.db"
    orphans, recovered, store_errors, stages = 0, 0, 0, []
    tunelab = str(Path(sys.executable).parent / "tunelab")
    argv = [tunelab, "run", "--num-prompts", "512", "--output-len", "128", "--concurrency", "4"]
    for n in range(count):
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any(
            "api_server" in " ".join(p.cmdline())
            for p in fault_procs.tagged(marker, exclude={proc.pid})
        ):
            time.sleep(0.5)
        if n % 2 == 0:
            time.sleep(rng.uniform(1.0, 20.0))
        else:
            while time.monotonic() < deadline and _last_status(db) != "measuring":
                time.sleep(0.2)
            time.sleep(rng.uniform(0.0, 2.0))
        stages.append(_last_status(db))
        proc.kill()
        proc.wait()
        left = fault_procs.wait_untagged(marker, 15.0)
        orphans += len(left)
        fault_procs.kill_all(left)
        try:
            with TrialStore(db) as store:
                recovered += len(store.recover())
        except Exception:
            store_errors += 1
    return {
        "faults_injected": count,
        "killed_while": stages,
        "trials_interrupted_and_recovered": recovered,
        "orphan_processes": orphans,
        "store_open_failures": store_errors,
    }


def hostile_part(work: Path) -> dict:
    from tests.support.fault_corpus import run_corpus

    verdicts = run_corpus(work / "corpus")
    cli = _cli_values(work / "cli")
    return {
        "preset_files_tried": len(verdicts),
        "preset_files_refused": sum(v.refused for v in verdicts),
        "preset_files_accepted_and_inert": sum(not v.refused and not v.unsafe for v in verdicts),
        "preset_files_unsafe": [f"{v.case}: {'; '.join(v.problems)}" for v in verdicts if v.unsafe],
        "preset_files_unclear": [
            f"{v.case}: {'; '.join(v.unclear)[:200]}" for v in verdicts if v.unclear
        ],
        "cli_values_tried": cli["tried"],
        "cli_values_unsafe": cli["unsafe"],
        "cli_values_unclear": cli["unclear"],
    }


def _cli_values(work: Path) -> dict:
    """The CLI bad-value cases, judged as the test does (exit, crash, writes, engine starts)."""
    import typer
    from typer.testing import CliRunner

    from tests.support.fault_cli import _empty_store, bad_cases, snapshot
    from tuner.cli.app import register_all
    from tuner.engine import server

    started: list[str] = []

    async def tripwire(self: server.Engine) -> None:
        started.append(self.spec.config.model)
        raise RuntimeError("tripwire: a refused command started an engine")

    real_start = server.Engine.start
    server.Engine.start = tripwire  # type: ignore[method-assign]
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["TUNELAB_HOME"] = str(home)
    app = register_all(typer.Typer(pretty_exceptions_enable=False))
    unsafe: list[str] = []
    unclear: list[str] = []
    cases = 0
    try:
        for name, _ in bad_cases(work, probe=True):
            case_dir = work / f"case-{cases}"
            case_dir.mkdir(parents=True)
            cases += 1
            argv = next(a for n, a in bad_cases(case_dir) if n == name)
            before = snapshot(home, case_dir)
            n_started = len(started)
            result = CliRunner().invoke(app, argv)
            after = snapshot(home, case_dir)
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            changed -= _empty_store(home, changed)
            changed = {c for c in changed if not c.startswith(str(home / "cache"))}
            crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
            problems = []
            if result.exit_code == 0:
                problems.append("exit 0")
            if changed and len(started) == n_started:  # a tripped engine start writes its trial
                problems.append(f"wrote {sorted(changed)}")
            if problems:
                unsafe.append(f"{name}: {', '.join(problems)}")
            if len(started) > n_started:
                unclear.append(f"{name}: not refused up front (an engine would have been started)")
            elif crashed:
                unclear.append(f"{name}: crashed with {type(result.exception).__name__}")
    finally:
        server.Engine.start = real_start  # type: ignore[method-assign]
    return {"tried": cases, "unsafe": unsafe, "unclear": unclear}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kills", type=int, default=50, help="SIGKILLs of the study (engine double)"
    )
    parser.add_argument(
        "--deaths", type=int, default=10, help="engine-core/worker SIGKILLs mid-run"
    )
    parser.add_argument(
        "--real-kills", type=int, default=0, help="SIGKILLs of `tunelab run` on the CPU engine"
    )
    parser.add_argument(
        "--tune-kills", type=int, default=20, help="SIGKILLs of `tunelab tune` (engine double)"
    )
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tunelab-faults-"))
    os.environ.setdefault("TUNELAB_HOME", str(work / "home"))
    os.chdir(ROOT)
    t0 = time.monotonic()
    empty = {
        "faults_injected": 0,
        "restarts": 0,
        "studies": 0,
        "trials_completed": 0,
        "trials_interrupted_and_recovered": 0,
        "trials_lost": 0,
        "orphan_processes": 0,
        "store_open_failures": 0,
        "notes": [],
    }
    figures: dict = {
        "kill_loop": kill_loop_part(args.kills, args.seed, work) if args.kills else empty
    }
    figures["tune_loop"] = (
        tune_loop_part(args.tune_kills, args.seed, work) if args.tune_kills else None
    )
    figures["engine_deaths"] = deaths_part(args.deaths, work) if args.deaths else None
    figures["real_engine_kills"] = (
        real_kills_part(args.real_kills, args.seed, work) if args.real_kills else None
    )
    figures["hostile_inputs"] = hostile_part(work)
    figures["wall_s"] = round(time.monotonic() - t0, 1)
    k, d, h, r = (
        figures["kill_loop"],
        figures["engine_deaths"],
        figures["hostile_inputs"],
        figures["real_engine_kills"],
    )
    t = figures["tune_loop"]
    zero = {
        "trials lost": k["trials_lost"] + (t["trials_lost"] if t else 0),
        "completed trials dropped from a study": t["completed_but_dropped_from_study"] if t else 0,
        "optuna/store inconsistencies": t["inconsistent"] if t else 0,
        "orphan processes": k["orphan_processes"]
        + (t["orphan_processes"] if t else 0)
        + (d["orphan_processes"] if d else 0)
        + (r["orphan_processes"] if r else 0),
        "hostile inputs accepted unsafely": len(h["preset_files_unsafe"])
        + len(h["cli_values_unsafe"]),
        "store failures": k["store_open_failures"]
        + (t["store_open_failures"] if t else 0)
        + (r["store_open_failures"] if r else 0),
        "crashes noticed after 1 s or never": (d["over_1s"] + d["crash_not_reported"]) if d else 0,
    }
    unclear = h["preset_files_unclear"] + h["cli_values_unclear"]
    figures["unclear"] = unclear
    figures["must_be_zero"] = zero
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        faults = (
            k["faults_injected"]
            + (t["faults_injected"] if t else 0)
            + (d["faults_injected"] if d else 0)
            + (r["faults_injected"] if r else 0)
        )
        print(
            f"faults injected:                  {faults}  (study SIGKILLs {k['faults_injected']}"
            + (f", `tunelab tune` SIGKILLs {t['faults_injected']}" if t else "")
            + (f", engine deaths {d['faults_injected']}" if d else "")
            + (f", real-engine SIGKILLs {r['faults_injected']}" if r else "")
            + ")"
        )
        print(
            f"trials completed:                 {k['trials_completed']}  over {k['restarts']} restarts, "
            f"{k['studies']} studies; {k['trials_interrupted_and_recovered']} interrupted trials recovered"
        )
        if t:
            print(
                f"tunelab tune:                     {t['trials_completed']} trials done over {t['restarts']} "
                f"restarts; {t['optuna_complete']} counted by the study"
            )
        print(f"trials lost:                      {zero['trials lost']}")
        print(
            f"done trials dropped by the study: {zero['completed trials dropped from a study']}"
            "  (done in the trial store, told FAIL to Optuna on resume)"
        )
        print(f"orphan processes found:           {zero['orphan processes']}")
        if d:
            print(
                f"engine deaths noticed in:         median {d['detect_ms_median']} ms, max {d['detect_ms_max']} ms "
                f"({d['trials_failed_with_reason']}/{d['faults_injected']} trials failed with the reason)"
            )
        if r:
            print(
                f"real-engine kills while:          {', '.join(r['killed_while'])}; "
                f"{r['trials_interrupted_and_recovered']} trials recovered as interrupted"
            )
        print(
            f"hostile inputs tried:             {h['preset_files_tried'] + h['cli_values_tried']}  "
            f"({h['preset_files_tried']} preset files: {h['preset_files_refused']} refused, "
            f"{h['preset_files_accepted_and_inert']} accepted and inert; {h['cli_values_tried']} bad CLI values)"
        )
        print(f"hostile inputs accepted unsafely: {zero['hostile inputs accepted unsafely']}")
        for line in h["preset_files_unsafe"] + h["cli_values_unsafe"]:
            print(f"  - {line}")
        print(
            f"refused without a clear message:  {len(unclear)}  (crash/traceback, or not refused before an engine start)"
        )
        for line in unclear:
            print(f"  - {line}")
        for note in k["notes"] + (t["notes"] if t else []):
            print(f"  note: {note}")
        print(f"wall time:                        {figures['wall_s']} s")
    return 0 if not any(zero.values()) and not unclear else 1


if __name__ == "__main__":
    sys.exit(main())
