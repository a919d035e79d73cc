"""Many GPUs on one node: one engine per GPU slot, up to N trials at once.

With N GPUs and configs that each need one GPU (tensor/pipeline/data
parallel size 1), N trials run at the same time, each engine pinned to its
own GPU through its environment. A config needing k GPUs gets slots of k
GPUs (N // k slots). The pinning follows the reference docs: vLLM reads
``CUDA_VISIBLE_DEVICES`` on CUDA and on ROCm (000 §Tensor parallelism, "ROCm
GPU visibility" note), and AMD's workload guide selects GPUs with
``HIP_VISIBLE_DEVICES`` (004 §6 GPU Selection). vLLM 0.32 on ROCm refuses
to start when the two disagree (vllm/platforms/rocm.py
``_sync_hip_cuda_env_vars``), so on ROCm both are set to the same list.
``ROCR_VISIBLE_DEVICES``, applied below HIP, is left as the user set it; the
GPU ids of the slots are then relative to it, exactly as the user's own
``CUDA_VISIBLE_DEVICES`` restricts which ids are used.

The GPU count comes from the telemetry backend, or is forced with
``TUNELAB_FORCE_GPU_COUNT`` or a parameter (how the scheduling is tested on
machines without GPUs).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.trials.events import TrialEventCallback
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

FORCE_ENV = "TUNELAB_FORCE_GPU_COUNT"
_PARALLEL_KEYS = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")


class SlotError(ValueError):
    """GPU slots cannot be formed as asked; the message says what to change."""


@dataclass(frozen=True)
class GpuSlot:
    """A set of GPUs one engine owns.

    Attributes:
        number: Slot number (0-based).
        devices: GPU ids, as the engine's visibility variable lists them.
    """

    number: int
    devices: tuple[str, ...]

    @property
    def visible(self) -> str:
        """The value of CUDA_VISIBLE_DEVICES for this slot (e.g. ``"2"`` or ``"2,3"``)."""
        return ",".join(self.devices)

    @property
    def indices(self) -> list[int] | None:
        """The devices as integer GPU indices (for the telemetry window), None if not integers."""
        try:
            return [int(d) for d in self.devices]
        except ValueError:
            return None

    def env(self, platform: str | None) -> dict[str, str]:
        """The variables that pin an engine to this slot on ``platform``."""
        out = {"CUDA_VISIBLE_DEVICES": self.visible}
        if (platform or "").lower() == "rocm":
            out["HIP_VISIBLE_DEVICES"] = self.visible
        return out


def world_size(trial: Trial) -> int:
    """GPUs one engine of the trial's config needs (TP x PP x DP)."""
    size = 1
    for key in _PARALLEL_KEYS:
        value = trial.config.engine.get(key, 1)
        try:
            size *= max(1, int(value))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise SlotError(f"{key} must be a whole number, got {value!r}") from None
    return size


def gpu_count(forced: int | None = None) -> int:
    """GPUs on this node: ``forced``, else TUNELAB_FORCE_GPU_COUNT, else what telemetry sees.

    Raises:
        SlotError: When the forced value is not a whole number >= 0.
    """
    if forced is None:
        raw = os.environ.get(FORCE_ENV, "").strip()
        if raw:
            try:
                forced = int(raw)
            except ValueError:
                raise SlotError(f"{FORCE_ENV}={raw!r} is not a whole number of GPUs") from None
    if forced is not None:
        if forced < 0:
            raise SlotError(f"GPU count must be >= 0, got {forced}")
        return forced
    from tuner.telemetry import select_backend

    backend = select_backend("auto")
    try:
        return backend.count()
    finally:
        backend.close()


def visible_ids(count: int, environ: dict[str, str] | None = None) -> list[str]:
    """The GPU ids slots may use: the user's own CUDA/HIP_VISIBLE_DEVICES list if set, else 0..count-1."""
    env = os.environ if environ is None else environ
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        raw = env.get(name, "").strip()
        if raw:
            return (
                [part.strip() for part in raw.split(",") if part.strip()][:count] if count else []
            )
    return [str(i) for i in range(count)]


def make_slots(
    count: int, per_engine: int = 1, environ: dict[str, str] | None = None
) -> list[GpuSlot]:
    """Groups the node's GPUs into slots of ``per_engine`` GPUs.

    Returns:
        The slots; empty when there are no GPUs (the caller then runs trials
        one after another without pinning, as on a CPU machine).

    Raises:
        SlotError: When a config needs more GPUs than the node has.
    """
    ids = visible_ids(count, environ)
    if not ids:
        return []
    if per_engine > len(ids):
        raise SlotError(
            f"a config needs {per_engine} GPUs per engine but only {len(ids)} are available; "
            "lower tensor-parallel-size or run on a larger node"
        )
    return [
        GpuSlot(n, tuple(ids[n * per_engine : (n + 1) * per_engine]))
        for n in range(len(ids) // per_engine)
    ]


async def run_parallel(
    trials: Sequence[Trial],
    store: TrialStore,
    *,
    gpus: int | None = None,
    platform: str | None = None,
    on_event: TrialEventCallback | None = None,
    **run_kwargs: Any,
) -> list[Trial]:
    """Runs ``trials`` on as many GPU slots at once as the node has, each engine pinned to its slot.

    Trials are taken in order by the first free slot. On a node without GPUs
    (count 0) they run one after another, unpinned.

    Args:
        trials: The trials (any configs).
        store: Where every state change is committed (shared by all slots).
        gpus: Force the GPU count (default: TUNELAB_FORCE_GPU_COUNT or telemetry).
        platform: rocm/cuda/cpu, to choose the visibility variables (default:
            the trials' recorded platform, else CUDA's variable only).
        on_event: Receives every trial's events.
        **run_kwargs: Passed to :func:`tuner.trials.runner.run_trial`
            (python, sampler, startup_timeout, context, engine_command ...).

    Returns:
        The trials in their input order, each in a final state.
    """
    from tuner.trials.context import resolve_context
    from tuner.trials.runner import run_trial

    if not trials:
        return []
    per_engine = max(world_size(t) for t in trials)
    slots = make_slots(gpu_count(gpus), per_engine)
    if not slots:
        for trial in trials:
            await run_trial(trial, store, on_event=on_event, **run_kwargs)
        return list(trials)
    # One rules context per model, resolved once (not once per trial and slot).
    contexts: dict[str, Any] = {}
    given = run_kwargs.pop("context", None)
    python = run_kwargs.get("python", sys.executable)
    for trial in trials:
        model = trial.config.model
        if model not in contexts:
            contexts[model] = given or await asyncio.to_thread(resolve_context, model, python)
    queue: asyncio.Queue[Trial] = asyncio.Queue()
    for trial in trials:
        queue.put_nowait(trial)

    async def worker(slot: GpuSlot) -> None:
        while True:
            try:
                trial = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            context = contexts[trial.config.model]
            await run_trial(
                trial,
                store,
                on_event=on_event,
                context=context,
                extra_env=slot.env(platform or context.target.platform),
                gpu_indices=slot.indices,
                **run_kwargs,
            )

    tasks = [asyncio.create_task(worker(slot), name=f"gpu-slot-{slot.number}") for slot in slots]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return list(trials)
