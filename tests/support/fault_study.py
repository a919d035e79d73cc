"""A study that can be SIGKILLed at any moment and restarted: the subject of the kill loops.

Run: ``python -m tests.support.fault_study --store DB --points N [--study NAME]
[--token-ms MS]``.
Each start is what a user's next ``tunelab`` does after a crash: open the
store (the real :class:`TrialStore`), :meth:`~TrialStore.recover` the trials
a dead tunelab left active (killing any engine left over), then resume the
study: run, one trial each, the sweep points (``max-num-seqs`` = 1..N) that
have no finished trial yet, through the real studies' ``TrialRunner`` and
trial runner on the engine double. It prints ``RECOVERED <id>`` per
recovered trial and ``COMMITTED <id> <point>`` right after a result is
committed, so the killer knows what must never be lost; ``COMPLETE`` when
every point is done.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tests.support.fault_procs import REPO, study_double_command

WORKLOAD = {"input_len": 8, "output_len": 16, "num_prompts": 12, "concurrency": 4, "seed": 7}


def done_points(store: object, study: str) -> dict[int, str]:
    """point -> id of its finished trial (the resume state, read from the store only)."""
    from tuner.trials.model import TrialStatus

    out: dict[int, str] = {}
    for trial in store.list(study, TrialStatus.DONE):  # type: ignore[attr-defined]
        point = trial.tags.get("point")
        if isinstance(point, int) and point not in out:
            out[point] = trial.id
    return out


async def run(db: str, study: str, points: int, token_ms: float = 1.0) -> int:
    from tuner import policy
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.rules import Target
    from tuner.studies.executor import TrialRunner
    from tuner.trials.context import RunContext
    from tuner.trials.model import Trial, TrialStatus
    from tuner.trials.store import TrialStore

    # The double's speed knob is a variable tunelab does not know: consent to it, as a user
    # would with --allow-env DOUBLE_TOKEN_MS.
    policy.grant(policy.Consent(env=frozenset({"DOUBLE_TOKEN_MS"})))
    store = TrialStore(db)
    for trial in store.recover():
        print(f"RECOVERED {trial.id}", flush=True)
    runner = TrialRunner(
        store,
        options={
            "context": RunContext(Target(note="catalogue"), None, []),
            "engine_cwd": str(REPO),
            "startup_timeout": 30.0,
        },
        command_for=study_double_command,
    )
    workload = Workload(**WORKLOAD)
    finished = done_points(store, study)
    for point in range(1, points + 1):
        if point in finished:
            continue
        config = EngineConfig(
            model="engine-double",
            env={"DOUBLE_TOKEN_MS": str(token_ms)},
            engine={"max-num-seqs": point},
        )
        trial = Trial(config=config, workload=workload, study=study, tags={"point": point})
        await runner.one(trial)
        if trial.status is TrialStatus.DONE:
            print(f"COMMITTED {trial.id} {point}", flush=True)
        else:
            print(f"NOTDONE {trial.id} {point} {trial.status}: {trial.failure_reason}", flush=True)
    store.close()
    print("COMPLETE", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", required=True)
    parser.add_argument("--study", default="killed")
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--token-ms", type=float, default=1.0)
    args = parser.parse_args(argv)
    return asyncio.run(run(args.store, args.study, args.points, args.token_ms))


if __name__ == "__main__":
    sys.exit(main())
