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
``TUNELAB_FORCE_GPU_COUNT`` or a parameter: fake GPUs, for tests and
benchmarks of the scheduling on machines without GPUs (the engine double then
records the visibility variables it was given).

This is the one scheduler of every study (A/B, sweep, search): a
:class:`GpuPool` hands out GPUs to trials, and :func:`run_parallel` runs trials
on it — mixed engine sizes packed first-fit so that no GPU idles while a
trial that fits waits behind a bigger one.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tuner.errors import TunelabError
from tuner.telemetry import select_backend
from tuner.trials.model import Trial

FORCE_ENV = "TUNELAB_FORCE_GPU_COUNT"
_PARALLEL_KEYS = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")


class SlotError(TunelabError, ValueError):
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


def forced_gpu_count(forced: int | None = None) -> int | None:
    """``forced``, else TUNELAB_FORCE_GPU_COUNT; None when neither says (telemetry decides).

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
    if forced is not None and forced < 0:
        raise SlotError(f"GPU count must be >= 0, got {forced}")
    return forced


def gpu_count(forced: int | None = None) -> int:
    """GPUs on this node: ``forced``, else TUNELAB_FORCE_GPU_COUNT, else what telemetry sees.

    Raises:
        SlotError: When the forced value is not a whole number >= 0.
    """
    forced = forced_gpu_count(forced)
    if forced is not None:
        return forced
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


def parse_gpu_list(text: str) -> list[str]:
    """``"0,1,2,3"`` → ``["0", "1", "2", "3"]`` (the ``--gpus`` option).

    Raises:
        SlotError: An empty list or a repeated id.
    """
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise SlotError(f"--gpus needs GPU ids such as 0,1,2,3; got {text!r}")
    if len(set(ids)) != len(ids):
        raise SlotError(f"--gpus lists a GPU twice: {text!r}")
    return ids


def node_gpus(restrict: Sequence[str] | None = None, forced: int | None = None) -> list[str]:
    """The GPU ids a study may use: all visible ones, or ``restrict`` (which must be among them).

    Raises:
        SlotError: ``restrict`` names a GPU this node does not show.
    """
    ids = visible_ids(gpu_count(forced))
    if restrict is None:
        return ids
    unknown = [g for g in restrict if g not in ids]
    if unknown:
        shown = ",".join(ids) or "none"
        raise SlotError(
            f"--gpus names GPU {','.join(unknown)} but this node shows {shown}; "
            "pick ids from that list"
        )
    return list(restrict)


@dataclass
class _Waiter:
    size: int
    devices: tuple[str, ...] | None
    future: asyncio.Future[GpuSlot]


@dataclass
class GpuPool:
    """The study's GPUs, handed out to trials so that no GPU is ever booked twice.

    Requests are served in order, except that a later request that fits the
    free GPUs is granted while an earlier, bigger one waits (first-fit
    backfill): a TP=2 trial waiting for two GPUs does not keep a TP=1 trial
    off the one GPU that is free. A request may name exact devices (the A/B's
    arm-to-GPU swap); it then waits for those.

    Attributes:
        ids: The GPU ids, in order.
    """

    ids: list[str]
    _free: list[str] = field(default_factory=list, init=False, repr=False)
    _waiters: list[_Waiter] = field(default_factory=list, init=False, repr=False)
    _taken: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._free = list(self.ids)

    @property
    def free(self) -> tuple[str, ...]:
        return tuple(self._free)

    def slot_count(self, size: int = 1) -> int:
        """How many engines of ``size`` GPUs fit at once."""
        return len(self.ids) // max(1, size)

    def slots(self, size: int = 1) -> list[GpuSlot]:
        """The pool cut into slots of ``size`` GPUs, in id order (for fixed placements)."""
        return [
            GpuSlot(n, tuple(self.ids[n * size : (n + 1) * size]))
            for n in range(self.slot_count(size))
        ]

    async def acquire(self, size: int, devices: Sequence[str] | None = None) -> GpuSlot:
        """GPUs for one engine: any ``size`` free ones, or exactly ``devices``.

        Raises:
            SlotError: More GPUs than the pool has, or devices outside it.
        """
        wanted = tuple(devices) if devices is not None else None
        if wanted is not None:
            size = len(wanted)
            if any(d not in self.ids for d in wanted):
                raise SlotError(f"GPUs {','.join(wanted)} are not all in this study's GPUs")
        if size > len(self.ids):
            raise SlotError(
                f"a config needs {size} GPUs per engine but only {len(self.ids)} are available; "
                "lower tensor-parallel-size or run on a larger node (or widen --gpus)"
            )
        waiter = _Waiter(size, wanted, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._grant()
        try:
            return await waiter.future
        except BaseException:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(waiter.future.result())
            raise

    def release(self, slot: GpuSlot) -> None:
        """Give a slot's GPUs back and serve whoever fits now."""
        for device in slot.devices:
            if device in self._free:
                raise SlotError(f"GPU {device} released twice")
            self._free.append(device)
        self._free.sort(key=self.ids.index)
        self._grant()

    def _grant(self) -> None:
        for waiter in list(self._waiters):
            if waiter.future.done():  # cancelled; its task removes it when it resumes
                self._waiters.remove(waiter)
                continue
            if len(self._free) < waiter.size:
                continue
            if waiter.devices is not None:
                if any(d not in self._free for d in waiter.devices):
                    continue
                chosen = waiter.devices
            else:
                chosen = tuple(self._free[: waiter.size])
            for device in chosen:
                self._free.remove(device)
            self._waiters.remove(waiter)
            waiter.future.set_result(GpuSlot(self._taken, chosen))
            self._taken += 1


RunOnSlot = Callable[[Trial, GpuSlot | None], Awaitable[Trial]]


async def run_parallel(
    trials: Sequence[Trial],
    run: RunOnSlot,
    pool: GpuPool | None,
    *,
    placement: Sequence[Sequence[str] | None] | None = None,
) -> list[Trial]:
    """Runs ``trials`` on the pool's GPUs, as many at once as fit, each on its own slot.

    Args:
        trials: The trials (any configs; each needs TP x PP x DP GPUs).
        run: Runs one trial pinned to a slot (None: no GPUs, unpinned).
        pool: The study's GPUs; None or empty runs the trials one after
            another, unpinned (a CPU machine).
        placement: Exact devices per trial (None entries: any free GPUs).

    Returns:
        What ``run`` returned, in the input order.

    Raises:
        SlotError: A trial needs more GPUs than the pool has (checked before
            anything starts).
    """
    if not trials:
        return []
    if pool is None or not pool.ids:
        return [await run(trial, None) for trial in trials]
    sizes = [world_size(t) for t in trials]
    if max(sizes) > len(pool.ids):
        raise SlotError(
            f"a config needs {max(sizes)} GPUs per engine but only {len(pool.ids)} are available; "
            "lower tensor-parallel-size or run on a larger node (or widen --gpus)"
        )
    wanted = list(placement) if placement is not None else [None] * len(trials)

    async def one(trial: Trial, size: int, devices: Sequence[str] | None) -> Trial:
        slot = await pool.acquire(size, devices)
        try:
            return await run(trial, slot)
        finally:
            pool.release(slot)

    tasks = [
        asyncio.create_task(one(t, n, d), name=f"trial-{t.id}")
        for t, n, d in zip(trials, sizes, wanted, strict=True)
    ]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
