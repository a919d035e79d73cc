"""GPU slots: forming them, pinning engines, and running trials on two slots at once (engine double)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.slots import (
    FORCE_ENV,
    GpuSlot,
    SlotError,
    gpu_count,
    make_slots,
    run_parallel,
    world_size,
)
from tuner.trials.store import TrialStore

REPO = Path(__file__).resolve().parents[1]


def test_slots_split_the_gpus_by_engine_size() -> None:
    assert make_slots(4, 1, environ={}) == [GpuSlot(i, (str(i),)) for i in range(4)]
    assert make_slots(4, 2, environ={}) == [GpuSlot(0, ("0", "1")), GpuSlot(1, ("2", "3"))]
    assert make_slots(5, 2, environ={}) == [GpuSlot(0, ("0", "1")), GpuSlot(1, ("2", "3"))]
    assert make_slots(0, 1, environ={}) == []
    with pytest.raises(SlotError, match="needs 4 GPUs per engine but only 2"):
        make_slots(2, 4, environ={})


def test_slots_respect_the_users_own_visibility_list() -> None:
    slots = make_slots(2, 1, environ={"CUDA_VISIBLE_DEVICES": "4, 6"})
    assert [s.visible for s in slots] == ["4", "6"]
    slots = make_slots(2, 1, environ={"HIP_VISIBLE_DEVICES": "1,3"})
    assert [s.visible for s in slots] == ["1", "3"]


def test_rocm_pins_with_both_variables_cuda_with_one() -> None:
    slot = GpuSlot(1, ("2", "3"))
    assert slot.env("cuda") == {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert slot.env("rocm") == {"CUDA_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "2,3"}
    assert slot.indices == [2, 3]
    assert GpuSlot(0, ("GPU-abc",)).indices is None


def test_gpu_count_forced_by_parameter_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gpu_count(3) == 3
    monkeypatch.setenv(FORCE_ENV, "2")
    assert gpu_count() == 2
    monkeypatch.setenv(FORCE_ENV, "two")
    with pytest.raises(SlotError, match="not a whole number"):
        gpu_count()
    with pytest.raises(SlotError, match=">= 0"):
        gpu_count(-1)


def test_gpu_count_without_force_asks_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_ENV, raising=False)
    # This machine has no GPU library: telemetry answers "none", i.e. 0 GPUs.
    assert gpu_count() == 0


def test_world_size_multiplies_the_parallel_sizes() -> None:
    cfg = EngineConfig(model="m", engine={"tensor-parallel-size": 2, "pipeline-parallel-size": 2})
    assert world_size(Trial(cfg, Workload())) == 4
    assert world_size(Trial(EngineConfig(model="m"), Workload())) == 1


def _double(record: Path) -> list[str]:
    plan = json.dumps({"ttft_ms": 5, "itl_ms": 5})
    return [
        sys.executable,
        "-m",
        "tests.support.engine_double",
        "--port",
        "{port}",
        "--plan",
        plan,
        "--startup",
        "1.5",
        "--record",
        str(record),
    ]


async def test_two_gpus_run_two_trials_at_once_on_distinct_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    record = tmp_path / "engines.jsonl"
    store = TrialStore(tmp_path / "t.db")
    context = RunContext(Target(vllm_version="0.32.0", platform="cuda", gpus=2), None, [])
    trials = [
        Trial(
            EngineConfig(model="stub-model", engine={"max-num-seqs": n}),
            Workload(input_len=8, output_len=20, num_prompts=8),
        )
        for n in (1, 2, 3, 4)
    ]
    started = time.monotonic()
    out = await run_parallel(
        trials, store, context=context, engine_command=_double(record), engine_cwd=str(REPO)
    )
    wall = time.monotonic() - started
    assert [t.status for t in out] == [TrialStatus.DONE] * 4, [t.failure_reason for t in out]
    engines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(engines) == 4
    assert {e["CUDA_VISIBLE_DEVICES"] for e in engines} == {"0", "1"}
    assert all(e["HIP_VISIBLE_DEVICES"] is None for e in engines)  # CUDA platform: one variable
    assert sorted(t.gpu_slot for t in out) == ["0", "0", "1", "1"]
    # Two engines were up at the same time, on different devices.
    spans = sorted((t.started_at, t.finished_at, t.gpu_slot) for t in out)
    overlaps = [
        (a, b)
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if b[0] < a[1] and a[2] != b[2]  # type: ignore[operator]
    ]
    assert overlaps, f"no two trials ran at once: {spans}"
    serial = sum(t.elapsed_s or 0.0 for t in out)
    assert wall < 0.75 * serial, f"wall {wall:.1f} s vs {serial:.1f} s of trials: not concurrent"


async def test_rocm_slots_set_hip_visible_devices_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    record = tmp_path / "engines.jsonl"
    store = TrialStore(tmp_path / "t.db")
    context = RunContext(Target(vllm_version="0.32.0", platform="rocm", gpus=1), None, [])
    t = Trial(EngineConfig(model="stub-model"), Workload(input_len=8, output_len=4, num_prompts=2))
    await run_parallel(
        [t], store, gpus=1, context=context, engine_command=_double(record), engine_cwd=str(REPO)
    )
    (engine,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert engine["CUDA_VISIBLE_DEVICES"] == "0" and engine["HIP_VISIBLE_DEVICES"] == "0"


async def test_no_gpu_runs_one_after_another_unpinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    record = tmp_path / "engines.jsonl"
    store = TrialStore(tmp_path / "t.db")
    context = RunContext(Target(vllm_version="0.32.0", platform="cpu"), None, [])
    trials = [
        Trial(EngineConfig(model="stub-model"), Workload(input_len=8, output_len=4, num_prompts=2))
        for _ in range(2)
    ]
    out = await run_parallel(
        trials, store, gpus=0, context=context, engine_command=_double(record), engine_cwd=str(REPO)
    )
    assert [t.status for t in out] == [TrialStatus.DONE] * 2
    engines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in engines] == [None, None]
    first, second = out
    assert first.finished_at is not None and second.started_at is not None
    assert first.finished_at <= second.started_at
