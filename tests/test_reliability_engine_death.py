"""The engine dies mid-benchmark: the trial fails within 1 s with the reason, the tree is gone,
and a study goes on with its next trial.

The fast cases use ``tests/support/fault_engine.py`` (a double with vLLM's
process shape: API server + ``VLLM::EngineCore`` + ``VLLM::Worker``, and a
server that keeps answering after they die, as vLLM's does for seconds). The
real CPU engine's core process is SIGKILLed once, in
tests/test_trials_engine.py::test_engine_crash_mid_benchmark_fails_the_trial_fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import fault_procs
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.trials.context import RunContext
from tuner.trials.events import TrialFailed, TrialProgress
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

# Long enough that the kill lands well inside the measured run.
SLOW = Workload(input_len=8, output_len=200, num_prompts=16, concurrency=4, seed=1)
QUICK = Workload(input_len=8, output_len=8, num_prompts=8, concurrency=4, seed=1)
NO_RULES_CONTEXT = RunContext(Target(note="catalogue"), None, [])


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> str:
    value = fault_procs.new_marker()
    monkeypatch.setenv(fault_procs.MARKER, value)
    return value


def _config(seqs: int = 4) -> EngineConfig:
    return EngineConfig(
        model="engine-double", env={"DOUBLE_TOKEN_MS": "5"}, engine={"max-num-seqs": seqs}
    )


class _Killer:
    """On the first progress event of ``target``, SIGKILLs one of the engine's VLLM children."""

    def __init__(self, record: Path, which: str, target: str | None = None) -> None:
        self.record = record
        self.which = which
        self.target = target
        self.killed_at: float | None = None
        self.failed_at: float | None = None
        self.failed_reason = ""

    def __call__(self, event: object) -> None:
        if isinstance(event, TrialProgress) and self.killed_at is None:
            if self.target is not None and event.trial_id != self.target:
                return
            pids = json.loads(self.record.read_text().splitlines()[-1])
            os.kill(pids[self.which], signal.SIGKILL)
            self.killed_at = time.monotonic()
        elif isinstance(event, TrialFailed) and self.killed_at and self.failed_at is None:
            self.failed_at = time.monotonic()
            self.failed_reason = event.reason


@pytest.mark.parametrize(
    ("which", "name"), [("core", "VLLM::EngineCore"), ("worker", "VLLM::Worker_0")]
)
async def test_sigkill_of_a_vllm_child_fails_the_trial_within_a_second(
    tmp_path: Path, marker: str, which: str, name: str
) -> None:
    from tuner.trials.runner import run_trial

    record = tmp_path / "pids.jsonl"
    killer = _Killer(record, which)
    store = TrialStore(tmp_path / "t.db")
    trial = Trial(config=_config(), workload=SLOW, study="death")
    t0 = time.monotonic()
    async with asyncio.timeout(60):
        await run_trial(
            trial,
            store,
            on_event=killer,
            context=NO_RULES_CONTEXT,
            engine_command=fault_procs.fault_engine_command(trial.config, record=record),
            engine_cwd=str(fault_procs.REPO),
        )
    assert killer.killed_at is not None, "the benchmark never reported progress"
    assert trial.status is TrialStatus.FAILED
    assert killer.failed_at is not None and killer.failed_at - killer.killed_at < 1.0, (
        f"failure noticed {killer.failed_at and killer.failed_at - killer.killed_at:.2f} s after the kill"
    )
    # The reason names the process that died; a 16 x 200-token run would take ~4 s more.
    assert name[:15] in killer.failed_reason and "crashed" in killer.failed_reason
    assert time.monotonic() - t0 < 30
    stored = store.get(trial.id)
    assert stored.status is TrialStatus.FAILED and name[:15] in (stored.failure_reason or "")
    assert stored.engine_pid is None
    left = fault_procs.wait_untagged(marker, 5.0)
    fault_procs.kill_all(left)
    assert not left, f"engine processes survived: {fault_procs.describe(left)}"
    store.close()


async def test_a_sweep_continues_after_one_engine_dies(tmp_path: Path, marker: str) -> None:
    """The first point's engine core is killed; the other points still run and finish."""
    from tuner.studies.executor import TrialRunner
    from tuner.studies.space import Param
    from tuner.studies.sweep import run_sweep

    record = tmp_path / "pids.jsonl"
    killer = _Killer(record, "core")
    store = TrialStore(tmp_path / "t.db")
    seen: list[Trial] = []

    def first_only(event: object) -> None:
        if isinstance(event, TrialProgress) and killer.target is None and seen == []:
            killer.target = event.trial_id
        killer(event)

    runner = TrialRunner(
        store,
        on_event=first_only,
        options={"context": NO_RULES_CONTEXT, "engine_cwd": str(fault_procs.REPO)},
        command_for=lambda cfg: fault_procs.fault_engine_command(cfg, record=record),
    )
    base = EngineConfig(model="engine-double", env={"DOUBLE_TOKEN_MS": "5"})
    async with asyncio.timeout(90):
        report = await run_sweep(
            base,
            replace(SLOW, output_len=60),
            [Param("max-num-seqs", "categorical", (2, 4, 8))],
            runner,
            study="death-sweep",
            on_trial=seen.append,
        )
    statuses = [t.status for t in seen]
    assert statuses == [TrialStatus.FAILED, TrialStatus.DONE, TrialStatus.DONE], statuses
    assert "VLLM::EngineCor" in (seen[0].failure_reason or "")
    assert report.best_values.get("max-num-seqs") in (4, 8)  # never the point that crashed
    assert len(record.read_text().splitlines()) == 3  # three engines started, one per point
    left = fault_procs.wait_untagged(marker, 5.0)
    fault_procs.kill_all(left)
    assert not left, f"engine processes survived: {fault_procs.describe(left)}"
    store.close()
