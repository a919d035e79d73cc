"""The benchmarked server errors or stalls on some requests, seen from a whole trial.

``tests/test_bench_stub.py`` proves the load generator counts each fault;
here the programmable stub server (``tests/support/openai_stub.py``, a fake
at the HTTP boundary) is started *as the trial's engine*, so the runner, the
store and the verdict are the real ones: faults end up in the stored trial
with their reasons, a stalling server never hangs a trial, and a trial is
failed by a clear threshold instead of being ranked on the requests that
happened to survive.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from tests.support import fault_procs
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

NO_RULES_CONTEXT = RunContext(Target(note="catalogue"), None, [])


def stub_command(plan: dict) -> list[str]:
    """The stub server as the engine command ({port} is filled in; JSON braces escaped)."""
    text = json.dumps(plan)
    return [sys.executable, "-m", "tests.support.openai_stub", "--port", "{port}", "--plan", text]


async def run_against(
    plan: dict, workload: Workload, tmp_path: Path, objective: str = "output_throughput"
) -> tuple[Trial, float]:
    from tuner.trials.runner import run_trial

    store = TrialStore(tmp_path / "t.db")
    trial = Trial(config=EngineConfig(model="stub-model"), workload=workload, objective=objective)
    t0 = time.monotonic()
    async with asyncio.timeout(60):
        await run_trial(
            trial,
            store,
            context=NO_RULES_CONTEXT,
            engine_command=stub_command(plan),
            engine_cwd=str(fault_procs.REPO),
        )
    elapsed = time.monotonic() - t0
    stored = store.get(trial.id)
    store.close()
    return stored, elapsed


async def test_every_request_failing_fails_the_trial_with_the_reason(tmp_path: Path) -> None:
    plan = {
        "ttft_ms": 5,
        "itl_ms": 1,
        "faults": [{"every": 1, "kind": "http", "status": 503, "message": "overloaded"}],
    }
    wl = Workload(input_len=8, output_len=8, num_prompts=8, concurrency=4)
    trial, elapsed = await run_against(plan, wl, tmp_path)
    assert trial.status is TrialStatus.FAILED
    assert "HTTP 503" in (trial.failure_reason or "")
    assert elapsed < 15


async def test_a_server_failing_every_request_stops_the_trial_early(tmp_path: Path) -> None:
    """The trial's benchmark gets the same guard as `tunelab bench` (issue 26): 400 requests
    that all fail end after 20 in a row, with the server's reason, not after all 400."""
    plan = {
        "ttft_ms": 5,
        "itl_ms": 1,
        "faults": [{"every": 1, "kind": "http", "status": 503, "message": "overloaded"}],
    }
    wl = Workload(input_len=8, output_len=8, num_prompts=400, concurrency=2)
    trial, _ = await run_against(plan, wl, tmp_path)
    assert trial.status is TrialStatus.FAILED
    reason = trial.failure_reason or ""
    assert "stopped after 20 consecutive failed requests: HTTP 503: overloaded" in reason, reason


async def test_stalling_requests_are_cut_counted_and_never_hang_the_trial(tmp_path: Path) -> None:
    """Every 8th stream stops after 2 tokens for 60 s; the stall timeout (0.5 s) cuts it."""
    plan = {
        "ttft_ms": 5,
        "itl_ms": 1,
        "faults": [{"every": 8, "kind": "stall", "after_tokens": 2, "stall_s": 60}],
    }
    wl = Workload(input_len=8, output_len=8, num_prompts=32, concurrency=8, stall_timeout_s=0.5)
    trial, elapsed = await run_against(plan, wl, tmp_path)
    assert elapsed < 20, f"the trial took {elapsed:.1f} s; a 60 s stall must not hold it"
    assert trial.results is not None, trial.failure_reason
    assert trial.results["tunelab"]["failures"] == {"stall": 4}
    assert trial.results["completed"] == 28 and trial.results["failed"] == 4


async def test_a_rare_error_is_counted_and_the_trial_still_finishes(tmp_path: Path) -> None:
    plan = {
        "ttft_ms": 5,
        "itl_ms": 1,
        "faults": [
            {"seq": [5], "kind": "error_event", "after_tokens": 2, "message": "engine hiccup"}
        ],
    }
    wl = Workload(input_len=8, output_len=8, num_prompts=64, concurrency=8)
    trial, _ = await run_against(plan, wl, tmp_path)
    assert trial.status is TrialStatus.DONE
    assert trial.results["tunelab"]["failures"] == {"error event": 1}
    assert trial.results["tunelab"]["failure_examples"]["error event"] == "engine hiccup"


@pytest.mark.parametrize("objective", ["output_throughput", "p99_ttft_ms"])
async def test_half_the_requests_failing_is_not_a_result(tmp_path: Path, objective: str) -> None:
    """A server that refuses half the load must not yield a 'done' trial ranked on the other half.

    Fast refusals make the surviving requests look *better* (less load), so a
    study would crown the broken config. Whatever threshold tunelab chooses,
    it lies below 50 %: such a trial ends failed, and the reason gives the counts.
    """
    plan = {
        "ttft_ms": 5,
        "itl_ms": 1,
        "faults": [{"every": 2, "kind": "http", "status": 500, "message": "no"}],
    }
    wl = Workload(input_len=8, output_len=8, num_prompts=32, concurrency=8)
    trial, _ = await run_against(plan, wl, tmp_path, objective)
    assert trial.status is TrialStatus.FAILED, (
        f"a trial with {trial.results and trial.results['failed']} of 32 requests failed "
        f"was stored as {trial.status} with {objective}={trial.objective_value}"
    )
    assert "16" in (trial.failure_reason or ""), trial.failure_reason
