"""The trial runner's own logic, against an engine double (the real CPU engine is in test_trials_engine).

The double (tests/support/engine_double.py) is a real HTTP server process
started through EngineSpec.command; it stands in for vLLM only where the
behaviour under test is tunelab's: skip before start, stage order, one engine
for several workloads, crash detection timing, start failures, cancellation.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.support.procs import alive
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.rules.types import Severity
from tuner.trials.context import RunContext, analyze_model
from tuner.trials.events import (
    TrialDone,
    TrialFailed,
    TrialLog,
    TrialProgress,
    TrialQueued,
    TrialSkipped,
    TrialStage,
)
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.runner import run_trial, run_workloads
from tuner.trials.store import TrialStore

REPO = Path(__file__).resolve().parents[1]
CPU = RunContext(Target(vllm_version="0.32.0", platform="cpu"), None, [])


def double(plan: dict | None = None, record: Path | None = None, startup: float = 0.0) -> list[str]:
    """The engine double's command line ("{port}" is filled in by EngineSpec)."""
    text = json.dumps(plan or {"ttft_ms": 5, "itl_ms": 2})
    cmd = [sys.executable, "-m", "tests.support.engine_double", "--port", "{port}", "--plan", text]
    if record is not None:
        cmd += ["--record", str(record)]
    if startup:
        cmd += ["--startup", str(startup)]
    return cmd


def trial(**wl: object) -> Trial:
    base = {"input_len": 16, "output_len": 8, "num_prompts": 12, "concurrency": 4}
    return Trial(
        EngineConfig(model="stub-model", engine={"max-num-seqs": 8}), Workload(**{**base, **wl})
    )


async def test_error_findings_skip_the_trial_without_starting_an_engine(tmp_path: Path) -> None:
    record = tmp_path / "starts.jsonl"
    store = TrialStore(tmp_path / "t.db")
    model = str(REPO / "tests/data/hf-configs/meta-llama__Llama-3.1-8B-Instruct.json")
    context = RunContext(
        Target(vllm_version="0.32.0", platform="rocm", gpus=8), analyze_model(model), []
    )
    t = Trial(
        EngineConfig(model=model, engine={"tensor-parallel-size": 3}), Workload(num_prompts=4)
    )
    events: list[object] = []
    out = await run_trial(
        t,
        store,
        on_event=events.append,
        context=context,
        engine_command=double(record=record),
        engine_cwd=str(REPO),
    )
    assert out.status is TrialStatus.SKIPPED
    assert not record.exists(), "an engine was started for a config the rules reject"
    assert out.log_path is None and out.startup_seconds is None
    assert any(f.rule == "tensor-parallel-divides-heads" for f in out.findings)
    assert [type(e) for e in events] == [TrialQueued, TrialSkipped]
    skipped = events[1]
    assert isinstance(skipped, TrialSkipped) and skipped.findings[0].severity is Severity.ERROR
    assert store.get(t.id).status is TrialStatus.SKIPPED
    assert store.get(t.id).findings == out.findings


async def test_a_trial_runs_through_its_stages_and_records_everything(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    events: list[object] = []
    t = trial(warmup_requests=2)
    out = await run_trial(
        t,
        store,
        on_event=events.append,
        context=CPU,
        engine_command=double(),
        engine_cwd=str(REPO),
        extra_env={"CUDA_VISIBLE_DEVICES": "3"},
    )
    assert out.status is TrialStatus.DONE, out.failure_reason
    stages = [e.stage for e in events if isinstance(e, TrialStage)]
    assert stages == ["starting", "ready", "warmup", "measuring", "stopping"]
    assert isinstance(events[0], TrialQueued)
    assert any(isinstance(e, TrialProgress) for e in events)
    assert any(isinstance(e, TrialLog) and "CUDA_VISIBLE_DEVICES=3" in e.line for e in events)
    done = [e for e in events if isinstance(e, TrialDone)]
    assert len(done) == 1 and done[0].trial is out
    assert out.results is not None and out.results["completed"] == 12
    assert out.objective_value == out.results["output_throughput"] > 0
    assert out.server is not None and out.server["available"] is True
    assert out.gpu_slot == "3" and out.vllm_version == "0.32.0" and out.platform == "cpu"
    assert out.startup_seconds is not None and out.startup_seconds > 0
    assert set(out.timings) >= {"rules_s", "start_s", "bench_s", "stop_s", "total_s"}
    assert Path(out.log_path or "").read_text().count("[engine double]") == 1
    stored = store.get(out.id)
    assert stored.status is TrialStatus.DONE and stored.results == out.results
    assert stored.engine_pid is None and stored.owner_pid == os.getpid()
    # What it ran on, read from the engine's interpreter (issue 17: schema 6).
    assert stored.environment is not None and stored.environment == out.environment
    assert stored.environment["vllm_version"] == "0.32.0"
    assert stored.environment["torch_version"] and stored.environment["platform"] == "cpu"


async def test_workloads_share_one_engine(tmp_path: Path) -> None:
    record = tmp_path / "starts.jsonl"
    store = TrialStore(tmp_path / "t.db")
    trials = [trial(concurrency=c, num_prompts=8) for c in (1, 2, 4)]
    out = await run_workloads(
        trials, store, context=CPU, engine_command=double(record=record), engine_cwd=str(REPO)
    )
    assert [t.status for t in out] == [TrialStatus.DONE] * 3
    assert len(record.read_text().splitlines()) == 1, "the engine was restarted between workloads"
    assert len({t.log_path for t in out}) == 1
    for t, c in zip(out, (1, 2, 4), strict=True):
        assert (
            t.results is not None
            and t.results["max_concurrency"] == c
            and t.results["completed"] == 8
        )
    # Each trial really ran its own workload: one at a time is much slower than four.
    serial, parallel = out[0].results["duration"], out[2].results["duration"]  # type: ignore[index]
    assert serial > 2 * parallel, (serial, parallel)


async def test_run_workloads_refuses_different_configs(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    other = Trial(EngineConfig(model="stub-model", engine={"max-num-seqs": 9}), Workload())
    with pytest.raises(ValueError, match="one config"):
        await run_workloads([trial(), other], store, context=CPU)


async def test_engine_that_cannot_start_fails_the_trial_with_its_reason(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    cmd = [
        sys.executable,
        "-c",
        "import sys; print('ValueError: unknown flag --bogus', flush=True); sys.exit(2)",
    ]
    events: list[object] = []
    out = await run_trial(trial(), store, on_event=events.append, context=CPU, engine_command=cmd)
    assert out.status is TrialStatus.FAILED
    assert "did not start" in (out.failure_reason or "") and "unknown flag --bogus" in (
        out.failure_reason or ""
    )
    assert any(isinstance(e, TrialFailed) for e in events)
    assert store.get(out.id).status is TrialStatus.FAILED


async def test_engine_crash_mid_benchmark_fails_the_trial_within_a_second(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    slow = {"ttft_ms": 20, "itl_ms": 50}  # 400 tokens x 50 ms: the run would take ~20 s
    t = trial(output_len=400, num_prompts=8, concurrency=8)
    killed: dict[str, float] = {}
    failed_at: dict[str, float] = {}

    def on_event(event: object) -> None:
        if (
            isinstance(event, TrialProgress)
            and "t" not in killed
            and event.progress.tokens_per_s > 0
        ):
            pid = store.get(t.id).engine_pid
            assert pid is not None
            killed["pids"] = pid  # type: ignore[assignment]
            os.kill(pid, signal.SIGKILL)
            killed["t"] = time.monotonic()
        if isinstance(event, TrialFailed):
            failed_at["t"] = time.monotonic()

    out = await run_trial(
        t, store, on_event=on_event, context=CPU, engine_command=double(slow), engine_cwd=str(REPO)
    )
    assert out.status is TrialStatus.FAILED
    assert "t" in killed, "the benchmark never reported progress"
    delay = failed_at["t"] - killed["t"]
    assert delay < 1.0, f"crash noticed after {delay:.2f} s"
    assert "measured run" in (out.failure_reason or "")
    assert store.get(t.id).status is TrialStatus.FAILED
    assert not alive({int(killed["pids"])})


async def test_cancelling_a_trial_marks_it_interrupted_and_stops_the_engine(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    t = trial(output_len=400, num_prompts=8, concurrency=8)
    measuring = asyncio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, TrialProgress):
            measuring.set()

    task = asyncio.create_task(
        run_trial(
            t,
            store,
            on_event=on_event,
            context=CPU,
            engine_command=double({"itl_ms": 50}),
            engine_cwd=str(REPO),
        )
    )
    await asyncio.wait_for(measuring.wait(), 30)
    pid = store.get(t.id).engine_pid
    assert pid is not None
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.get(t.id).status is TrialStatus.INTERRUPTED
    assert not alive({pid})


class FakeTwoGpuBackend:
    """FAKE telemetry backend (no GPU here): two GPUs at a constant 300 W / 200 W, 10 / 20 GiB used."""

    name = "fake"
    description = "fake: 2 GPUs"
    reasons = ()

    def open(self) -> None:
        return None

    def count(self) -> int:
        return 2

    def snapshot(self, index: int):
        from tuner.telemetry.types import GpuSnapshot

        return GpuSnapshot(
            index=index,
            name=f"Fake GPU {index}",
            power_w=300.0 if index == 0 else 200.0,
            vram_used=(10 + 10 * index) * 1024**3,
            vram_total=80 * 1024**3,
        )

    def close(self) -> None:
        return None


async def test_telemetry_window_of_the_slot_gpu(tmp_path: Path) -> None:
    from tuner.telemetry.sampler import Sampler

    store = TrialStore(tmp_path / "t.db")
    sampler = Sampler(FakeTwoGpuBackend(), rate_hz=20.0, history=2000)  # type: ignore[arg-type]
    sampler.start()
    try:
        await asyncio.sleep(0.2)
        t = trial(output_len=40, num_prompts=8, concurrency=4)  # ~1 s at 20 ms per token
        out = await run_trial(
            t,
            store,
            context=CPU,
            sampler=sampler,
            gpu_indices=[1],
            extra_env={"CUDA_VISIBLE_DEVICES": "1"},
            engine_command=double({"ttft_ms": 10, "itl_ms": 20}),
            engine_cwd=str(REPO),
        )
    finally:
        sampler.stop()
    assert out.status is TrialStatus.DONE, out.failure_reason
    tel = out.telemetry
    assert tel is not None and [g["index"] for g in tel["gpus"]] == [1]
    assert out.gpu_names == ["Fake GPU 1"]
    assert tel["peak_vram_bytes"] == 20 * 1024**3
    assert tel["mean_power_w"] == pytest.approx(200.0)
    # Energy integrates the covered part of the window at the fake's constant 200 W. On a
    # starved box the sample after the window's end can miss the runner's short wait
    # (one CI run: coverage 0.72); then tokens per joule must be None, never a guess.
    assert 0.5 < tel["coverage"] <= 1.0
    covered_s = tel["coverage"] * tel["duration_s"]
    assert tel["energy_j"] == pytest.approx(200.0 * covered_s, rel=1e-6)
    tokens = out.results["total_output_tokens"]  # type: ignore[index]
    if tel["coverage"] >= 0.999:
        assert tel["tokens_per_joule"] == pytest.approx(tokens / tel["energy_j"])
    else:
        assert tel["tokens_per_joule"] is None
    # The window is the measured run: about the benchmark's own duration.
    assert tel["duration_s"] == pytest.approx(out.results["duration"], abs=0.3)  # type: ignore[index]
    assert store.get(out.id).telemetry == tel


async def test_a_run_where_every_request_fails_is_a_failed_trial(tmp_path: Path) -> None:
    store = TrialStore(tmp_path / "t.db")
    plan = {"faults": [{"every": 1, "kind": "http", "status": 500, "message": "overloaded"}]}
    out = await run_trial(
        trial(num_prompts=4), store, context=CPU, engine_command=double(plan), engine_cwd=str(REPO)
    )
    assert out.status is TrialStatus.FAILED
    assert "every request failed" in (out.failure_reason or "") and "4 x" in (
        out.failure_reason or ""
    )
