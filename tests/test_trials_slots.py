"""GPU slots: forming them, pinning engines, and running trials on two slots at once (engine double)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.studies.executor import TrialRunner
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.slots import (
    FORCE_ENV,
    GpuPool,
    GpuSlot,
    SlotError,
    gpu_count,
    make_slots,
    node_gpus,
    parse_gpu_list,
    run_parallel,
    world_size,
)
from tuner.trials.store import TrialStore


class _ClientWatch:
    """Records, at each progress event, whether the benchmark client runs as a child process."""

    def __init__(self) -> None:
        self.in_child: list[bool] = []

    def __call__(self, event: object) -> None:
        import psutil

        from tuner.trials.events import TrialProgress

        if isinstance(event, TrialProgress):
            kids = psutil.Process().children(recursive=True)
            self.in_child.append(
                any("tuner.bench.own_process" in " ".join(k.cmdline()) for k in kids)
            )


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
    options = {"context": context, "engine_command": _double(record), "engine_cwd": str(REPO)}
    watch = _ClientWatch()
    out = await TrialRunner(store, on_event=watch, options=options).all(trials)
    assert [t.status for t in out] == [TrialStatus.DONE] * 4, [t.failure_reason for t in out]
    # Side by side, each trial's client runs in a process of its own (no shared GIL).
    assert watch.in_child and all(watch.in_child)
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
    # ... and never two on one device. (A wall-clock ratio used to stand here; it failed
    # on a loaded 2-core box — 24.3 s wall for 8.1 s of trials — while the spans still
    # overlapped: concurrency is proved by the spans, speed by benchmarks/study_speed.py.)
    same_gpu = [
        (a, b)
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if b[0] < a[1] and a[2] == b[2]  # type: ignore[operator]
    ]
    assert not same_gpu, f"a GPU ran two trials at once: {same_gpu}"


async def test_rocm_slots_set_hip_visible_devices_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    record = tmp_path / "engines.jsonl"
    store = TrialStore(tmp_path / "t.db")
    context = RunContext(Target(vllm_version="0.32.0", platform="rocm", gpus=1), None, [])
    t = Trial(EngineConfig(model="stub-model"), Workload(input_len=8, output_len=4, num_prompts=2))
    monkeypatch.setenv(FORCE_ENV, "1")
    options = {"context": context, "engine_command": _double(record), "engine_cwd": str(REPO)}
    await TrialRunner(store, options=options).one(t)
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
    monkeypatch.setenv(FORCE_ENV, "0")
    options = {"context": context, "engine_command": _double(record), "engine_cwd": str(REPO)}
    watch = _ClientWatch()
    out = await TrialRunner(store, on_event=watch, options=options).all(trials)
    assert [t.status for t in out] == [TrialStatus.DONE] * 2
    # One slot: the client stays in this process, on its own loop (no spawn per trial).
    assert watch.in_child and not any(watch.in_child)
    engines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in engines] == [None, None]
    first, second = out
    assert first.finished_at is not None and second.started_at is not None
    assert first.finished_at <= second.started_at


def _sized(tp: int, name: str) -> Trial:
    cfg = EngineConfig(model="m", engine={"tensor-parallel-size": tp, "max-num-seqs": 1})
    return Trial(cfg, Workload(), tags={"name": name})


async def test_mixed_sizes_are_packed_so_no_gpu_idles_while_a_fitting_trial_waits() -> None:
    """4 GPUs; queue TP2, TP4, TP1, TP1, TP2: the TP1s and the second TP2 fill the GPUs the
    first TP2 leaves free while the TP4 waits, and no GPU is ever held by two trials."""
    pool = GpuPool(["0", "1", "2", "3"])
    held: dict[str, str] = {}
    log: list[tuple[str, str, tuple[str, ...]]] = []
    gates = {name: asyncio.Event() for name in ("tp2a", "tp4", "tp1a", "tp1b", "tp2b")}

    async def run(trial: Trial, slot: GpuSlot | None) -> Trial:
        assert slot is not None
        name = trial.tags["name"]
        for device in slot.devices:
            assert device not in held, f"GPU {device} double-booked by {name} and {held[device]}"
            held[device] = name
        log.append(("start", name, slot.devices))
        await gates[name].wait()
        for device in slot.devices:
            del held[device]
        log.append(("end", name, slot.devices))
        return trial

    trials = [
        _sized(2, "tp2a"),
        _sized(4, "tp4"),
        _sized(1, "tp1a"),
        _sized(1, "tp1b"),
        _sized(2, "tp2b"),
    ]
    task = asyncio.create_task(run_parallel(trials, run, pool))
    await asyncio.sleep(0.01)
    started = {name for kind, name, _ in log if kind == "start"}
    assert started == {"tp2a", "tp1a", "tp1b"}, log  # backfilled past the waiting TP4
    assert sorted(held) == ["0", "1", "2", "3"]  # every GPU busy
    gates["tp1a"].set()
    await asyncio.sleep(0.01)
    # One GPU free: the TP2 and TP4 both need more, so nothing else starts yet.
    assert {name for kind, name, _ in log if kind == "start"} == started
    gates["tp1b"].set()
    await asyncio.sleep(0.01)
    # Two GPUs free: the TP4 (first in line) still does not fit, the second TP2 does.
    assert ("start", "tp2b", ("2", "3")) in log, log
    gates["tp2a"].set()
    gates["tp2b"].set()
    await asyncio.sleep(0.01)
    assert ("start", "tp4", ("0", "1", "2", "3")) in log
    gates["tp4"].set()
    out = await task
    assert out == trials and pool.free == ("0", "1", "2", "3")


async def test_restricted_gpu_list_is_all_a_study_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FORCE_ENV, "8")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("HIP_VISIBLE_DEVICES", raising=False)
    ids = node_gpus(parse_gpu_list("2, 5"))
    assert ids == ["2", "5"]
    with pytest.raises(SlotError, match="names GPU 9 but this node shows 0,1,2"):
        node_gpus(["9"])
    with pytest.raises(SlotError, match="twice"):
        parse_gpu_list("1,1")
    pool = GpuPool(ids)
    used: list[tuple[str, ...]] = []

    async def run(trial: Trial, slot: GpuSlot | None) -> Trial:
        assert slot is not None
        used.append(slot.devices)
        await asyncio.sleep(0.01)
        return trial

    await run_parallel([_sized(1, str(i)) for i in range(5)], run, pool)
    assert {d for devices in used for d in devices} == {"2", "5"}
    with pytest.raises(SlotError, match="needs 4 GPUs per engine but only 2"):
        await run_parallel([_sized(4, "big")], run, pool)


async def test_a_cancelled_study_gives_every_gpu_back() -> None:
    pool = GpuPool(["0", "1"])

    async def run(trial: Trial, slot: GpuSlot | None) -> Trial:
        await asyncio.sleep(10)
        return trial

    task = asyncio.create_task(run_parallel([_sized(1, str(i)) for i in range(4)], run, pool))
    await asyncio.sleep(0.01)
    assert pool.free == ()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.free == ("0", "1")
