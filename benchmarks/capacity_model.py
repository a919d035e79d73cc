"""Capacity probes to bracket the boundary, with and without the study model placing them.

Issue 31: once three probes of a launch are measured, the model (tuner.studies.capacity_model)
predicts the SLO's percentiles at every load and measures its boundary guess first. This runs
the same capacity search side by side — doubling and bisection alone (``--no-guess``), then
with the model — and prints, per config, the capacity each found, the probes each needed to
bracket the boundary (the rest of the budget re-measures its two sides), and the ratio.

* ``--engine double`` (default): the study engine double (tests/support/study_engine_double.py:
  a token gap per step, requests beyond max-num-seqs queue), one launch per search, for each
  ``--seqs`` value; seconds.
* ``--engine cpu``: the real vLLM CPU engine on the demo model. Its capacity varies several-
  fold from one launch to the next (one pair of launches measured 50 and 17 users at the same
  SLO), so two launches cannot be compared: both searches run on ONE engine, their probes
  interleaved (plain, model, plain, ...), each to its bracket, ``--rounds`` times. The
  search is the product's (tuner.studies.capacity_model.GuidedSearch, as every launch
  runs it); only the trial runner around it is left out. Run it under the engine lock::

    flock /tmp/tunelab-engine.lock .venv/bin/python benchmarks/capacity_model.py --engine cpu
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

from tests.support.study_cli import double_command  # noqa: E402
from tuner.bench.workload import Workload  # noqa: E402
from tuner.config import EngineConfig  # noqa: E402
from tuner.rules import Target  # noqa: E402
from tuner.studies.capacity import Grid, LaunchCapacity  # noqa: E402
from tuner.studies.capacity_run import run_capacity  # noqa: E402
from tuner.studies.executor import TrialRunner  # noqa: E402
from tuner.studies.slo import parse_slo  # noqa: E402
from tuner.trials.context import RunContext  # noqa: E402
from tuner.trials.store import TrialStore  # noqa: E402


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


async def search(
    config: EngineConfig, base: Workload, args: argparse.Namespace, model: bool, name: str
) -> LaunchCapacity:
    context = RunContext(Target(note="study engine double"), None, [])
    with TrialStore(Path(os.environ["TUNELAB_HOME"]) / "trials.db") as store:
        runner = TrialRunner(store, None, {"startup_timeout": 60, "context": context},
                             double_command)  # fmt: skip
        report = await run_capacity(config, base, parse_slo(args.slo),
                                    Grid("concurrency", 1, 1, args.limit), runner, launches=1,
                                    probes=args.probes, study=name, model=model)  # fmt: skip
    return report.launches[0]


def same_engine(config: EngineConfig, base: Workload, args: argparse.Namespace) -> list[tuple]:
    """Both searches on one CPU engine, probes interleaved; (plain, model) GuidedSearch pairs."""
    from tests.support.engine_thread import EngineThread
    from tuner.bench import run_benchmark
    from tuner.engine import EngineSpec
    from tuner.studies.capacity import Bracket
    from tuner.studies.capacity_model import GuidedSearch
    from tuner.studies.capacity_run import probe_workload
    from tuner.trials.model import Trial, TrialStatus

    grid, slo = Grid("concurrency", 1, 1, args.limit), parse_slo(args.slo)
    home = Path(os.environ["TUNELAB_HOME"])
    spec = EngineSpec(config=config, log_path=home / "engine.log", startup_timeout=600)
    runner = EngineThread(spec)
    eng = runner.start()
    # As every CPU trial runs (tuner.trials.runner._lay_out): the engine beside its worker.
    from tuner.engine.cpu_layout import split

    assert runner.engine is not None and runner.engine.pid is not None
    layout = split(runner.engine.pid, eng.pids)
    where = f"engine {sorted(layout.engine_cores)}, server {sorted(layout.server_cores)}"
    print(f"  cpu layout: {layout.reason or where}", flush=True)
    at = lambda v: probe_workload(base, grid, v)  # noqa: E731
    out = []
    try:
        for _ in range(args.rounds):
            pair = (GuidedSearch(Bracket(grid, slo), False), GuidedSearch(Bracket(grid, slo), True))
            while any(s.converged_at is None and len(s.measured) < args.probes for s in pair):
                for search in pair:
                    if search.converged_at is not None or len(search.measured) >= args.probes:
                        continue
                    units, expected = search.next(at)
                    wl = at(grid.value(units))
                    res = asyncio.run(run_benchmark(eng.url, eng.served_model, wl))
                    trial = Trial(config=config, workload=wl, study="bench",
                                  status=TrialStatus.DONE, results=dict(res.metrics),
                                  server={"mean_itl_ms": res.server.mean_itl_ms},
                                  platform="cpu", vllm_version=args.vllm)  # fmt: skip
                    values = {k: float(res.metrics[k]) for k in slo.keys}
                    search.record(units, values, trial, expected)
                    mark = ("◆" if expected is not None else "") + ("" if slo.met(values) else "✗")
                    print(f"    {'model' if search.model else 'plain'} {grid.value(units):g}{mark}",
                          flush=True)  # fmt: skip
            out.append(pair)
    finally:
        runner.stop()
    return out


def cpu_main(args: argparse.Namespace, base: Workload) -> None:
    from tuner.cpu_demo import demo_config

    for seqs in args.seqs:
        config = demo_config().with_values({"max-num-seqs": seqs})
        print(f"max-num-seqs {seqs}: one engine, {args.rounds} round(s)")
        print("\n| round | capacity plain / model | probes to bracket plain / model "
              "| placed by the model |")  # fmt: skip
        print("|---|---|---|---|")
        for i, (plain, guided) in enumerate(same_engine(config, base, args)):
            cap = [s.bracket.grid.value(s.bracket.bounds()[0]) for s in (plain, guided)]
            print(f"| {i + 1} | {cap[0]:g} / {cap[1]:g} | {plain.converged_at} / "
                  f"{guided.converged_at} | {guided.guided} (model off: {guided.off}) |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("double", "cpu"), default="double")
    ap.add_argument("--seqs", type=ints, default=None, help="max-num-seqs values")
    ap.add_argument("--slo", default=None)
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--probes", type=int, default=12)
    ap.add_argument("--input-len", type=int, default=None)
    ap.add_argument("--output-len", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=2, help="cpu: searches per engine")
    ap.add_argument("--vllm", default="0.32.0", help="cpu: the installed vLLM release")
    args = ap.parse_args()
    double = args.engine == "double"
    args.seqs = args.seqs or ([6, 12, 24, 48] if double else [8])
    args.slo = args.slo or ("p99_ttft_ms<=100" if double else "p99_ttft_ms<=1000")
    os.environ["TUNELAB_HOME"] = tempfile.mkdtemp(prefix="tunelab-capmodel-")
    os.environ.setdefault("DOUBLE_TOKEN_MS", "10")
    base = Workload(input_len=args.input_len or (16 if double else 256),
                    output_len=args.output_len or (16 if double else 32), num_prompts=4,
                    warmup_requests=0 if double else 4)  # fmt: skip
    print(f"{args.engine} engine · SLO {args.slo} · limit {args.limit} · {args.probes} probes "
          f"per launch · {base.input_len} in / {base.output_len} out")  # fmt: skip
    if not double:
        cpu_main(args, base)
        return
    rows = []
    for seqs in args.seqs:
        config = EngineConfig(model="engine-double", engine={"max-num-seqs": seqs})
        found = {}
        for model in (False, True):
            name = f"cap-{seqs}-{'model' if model else 'plain'}"
            found[model] = asyncio.run(search(config, base, args, model, name))
            lc = found[model]
            print(f"  max-num-seqs {seqs:>3} {'model' if model else 'plain'}: capacity "
                  f"{lc.capacity:g} · probes {lc.probes_text()} · {lc.search_text()}",
                  flush=True)  # fmt: skip
        rows.append((seqs, found[False], found[True]))
    print("\n| max-num-seqs | capacity plain / model | probes to bracket plain / model | fewer |")
    print("|---|---|---|---|")
    for seqs, plain, guided in rows:
        a, b = plain.to_converge, guided.to_converge
        fewer = f"{1 - b / a:.0%}" if a and b else "-"
        print(f"| {seqs} | {plain.capacity:g} / {guided.capacity:g} | {a} / {b} | {fewer} |")


if __name__ == "__main__":
    main()
