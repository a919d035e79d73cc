"""How a study's trials are executed: the trial runner bound to a store, on GPU slots.

A study (A/B, sweep, search) builds trials and hands them to a
``TrialRunner``: the trial runner (``tuner.trials.runner``) bound to the
study's store, event callback and run options, with the rules' context
(introspection, model analysis) resolved once per model instead of once per
trial. Options the runner offers (GPU slots, an engine double's command in
tests) pass through it without the study code knowing about them. Kept
apart from :mod:`tuner.studies.common` (reading results) so that reading a
study — the TUI at start, the report — does not load the engine and
benchmark stack.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.studies.progress import StudyTracker
from tuner.studies.pruning import PruneDecision
from tuner.trials.context import resolve_context
from tuner.trials.events import TrialEvent, TrialProgress, TrialPruned
from tuner.trials.model import PRUNED_TAG, Trial, TrialStatus
from tuner.trials.runner import run_trial, run_workloads
from tuner.trials.slots import GpuPool, GpuSlot, node_gpus, run_parallel

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.config import EngineConfig
    from tuner.trials.events import TrialEventCallback
    from tuner.trials.store import TrialStore

# Judges a trial's progress; a decision stops (prunes) the trial.
Watch = Callable[[Trial, "BenchProgress"], PruneDecision | None]


class _Stopper:
    """Forwards one trial's events and stops the trial when its watch says it is dominated.

    The stop is a cancel of the task running the trial, requested while the
    trial is in its measured run (progress events come only from there): the
    runner then marks it interrupted and stops its engine as for Ctrl-C, and
    :meth:`TrialRunner._run_one` turns that into a pruned trial.
    """

    def __init__(self, trial: Trial, watch: Watch, forward: Callable[[TrialEvent], None]) -> None:
        self.trial = trial
        self.watch = watch
        self.forward = forward
        self.task = asyncio.current_task()
        self.decision: PruneDecision | None = None

    def __call__(self, event: TrialEvent) -> None:
        self.forward(event)
        if self.decision is not None or not isinstance(event, TrialProgress):
            return
        if event.trial_id != self.trial.id:
            return
        decision = self.watch(self.trial, event.progress)
        if decision is not None and self.task is not None:
            self.decision = decision
            # In the trial before the runner's interrupt write, so the row says why at once.
            self.trial.tags[PRUNED_TAG] = decision.to_dict()
            self.task.cancel()

    def ours(self) -> bool:
        """After a CancelledError: True when only our stop cancelled the task (take it back)."""
        if self.decision is None or self.task is None:
            return False
        return self.task.uncancel() == 0


@dataclass
class TrialRunner:
    """Runs a study's trials through the trial runner with fixed options, on GPU slots.

    Every study runs its trials through here, and every trial through the
    one scheduler (:func:`tuner.trials.slots.run_parallel` on the study's
    :class:`~tuner.trials.slots.GpuPool`): each engine is pinned to its own
    GPUs and its telemetry window restricted to them; without GPUs trials run
    one after another, unpinned, as on a CPU machine.

    Attributes:
        store: Where every trial is recorded.
        on_event: Trial events, for progress displays.
        options: Keyword options of ``run_trial``/``run_workloads`` (python,
            sampler, startup_timeout, extra_env ...).
        command_for: Builds the engine command line per config — engine
            doubles in tests only; production leaves it None (real vLLM).
        gpus: The GPU ids the study may use (``--gpus``); None: all visible.
        progress: The study's launches, waves and slots; its ``StudyStatus``
            events go to ``on_event`` with the trial events.
    """

    store: TrialStore
    on_event: TrialEventCallback | None = None
    options: dict[str, Any] = field(default_factory=dict)
    command_for: Callable[[EngineConfig], list[str]] | None = None
    gpus: list[str] | None = None
    progress: StudyTracker = field(default_factory=StudyTracker, repr=False)
    _contexts: dict[str, Any] = field(default_factory=dict, repr=False)
    _pool: GpuPool | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.progress.emit = self._forward

    def begin(self, study: str, kind: str, total: int, waves: int | None = None) -> StudyTracker:
        """A study starts: ``total`` trials planned (``waves`` if it has them); its tracker."""
        self.progress.begin(study, kind, total, self.slot_count(), waves)
        return self.progress

    @property
    def pool(self) -> GpuPool:
        """The study's GPUs (empty on a machine without GPUs), found once.

        Raises:
            SlotError: ``gpus`` names GPUs the node does not show.
        """
        if self._pool is None:
            self._pool = GpuPool(node_gpus(self.gpus))
        return self._pool

    def slot_count(self, size: int = 1) -> int:
        """Trials of ``size`` GPUs that can run at once (1 without GPUs)."""
        return max(1, self.pool.slot_count(size))

    async def _kwargs(self, config: EngineConfig) -> dict[str, Any]:
        kwargs = dict(self.options)
        if "context" not in kwargs:
            # Introspection and model analysis once per model, not once per trial.
            if config.model not in self._contexts:
                python = kwargs.get("python", sys.executable)
                self._contexts[config.model] = await asyncio.to_thread(
                    resolve_context, config.model, python
                )
            kwargs["context"] = self._contexts[config.model]
        if self.command_for is not None:
            kwargs["engine_command"] = self.command_for(config)
        return kwargs

    async def _pinned(self, config: EngineConfig, slot: GpuSlot | None) -> dict[str, Any]:
        kwargs = await self._kwargs(config)
        if slot is not None:
            platform = kwargs["context"].target.platform
            kwargs["extra_env"] = {**kwargs.get("extra_env", {}), **slot.env(platform)}
            kwargs["gpu_indices"] = slot.indices
        if "client_process" not in kwargs:
            # Trials side by side: each client in its own process, so they share no GIL
            # (benchmarks/client_headroom.py: 0.85x the requests/s with 4 in one process).
            kwargs["client_process"] = self.slot_count() > 1
        return kwargs

    def _forward(self, event: TrialEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def announce(self, event: TrialEvent) -> None:
        """A trial event decided outside a run (a search's point the model did not launch)."""
        self._emit(event)

    def _emit(self, event: TrialEvent) -> None:
        """A trial event: to the watcher, then folded into the study's progress."""
        self._forward(event)
        self.progress.observe(event)

    async def _run_one(self, trial: Trial, slot: GpuSlot | None, watch: Watch | None) -> Trial:
        name = _slot_name(slot)
        self.progress.slot_start(name, trial, gpus=_slot_gpus(slot))
        try:
            return await self._run_watched(trial, slot, watch)
        finally:
            self.progress.slot_end(name, trial)

    async def _run_watched(self, trial: Trial, slot: GpuSlot | None, watch: Watch | None) -> Trial:
        kwargs = await self._pinned(trial.config, slot)
        if watch is None:
            return await run_trial(trial, self.store, on_event=self._emit, **kwargs)
        stopper = _Stopper(trial, watch, self._emit)
        try:
            done = await run_trial(trial, self.store, on_event=stopper, **kwargs)
        except asyncio.CancelledError:
            if not stopper.ours():
                raise
            assert stopper.decision is not None
            return self._pruned(trial, stopper.decision)
        if stopper.decision is not None:
            # The stop came as the run ended and was absorbed on its way out (the
            # runner winds a crashed benchmark down under suppress): the trial
            # ended on its own, so it is not pruned; take the cancel request back.
            stopper.ours()
            trial.tags.pop(PRUNED_TAG, None)
            self.store.save(trial)
        return done

    def _pruned(self, trial: Trial, decision: PruneDecision) -> Trial:
        """Record a stopped trial as pruned (engine already stopped by the runner)."""
        reason = decision.reason()
        trial.tags[PRUNED_TAG] = decision.to_dict()
        self.store.update_status(trial, TrialStatus.INTERRUPTED, failure_reason=reason)
        self._emit(TrialPruned(trial, reason))
        return trial

    async def one(
        self, trial: Trial, devices: Sequence[str] | None = None, watch: Watch | None = None
    ) -> Trial:
        """Run one trial to a final state (its own engine, on free GPUs or ``devices``).

        ``watch`` judges its progress; a decision stops it as pruned.
        """

        async def run(item: Trial, slot: GpuSlot | None) -> Trial:
            return await self._run_one(item, slot, watch)

        (done,) = await run_parallel([trial], run, self.pool, placement=[devices])
        return done

    async def all(
        self,
        trials: Sequence[Trial],
        placement: Sequence[Sequence[str] | None] | None = None,
        on_done: Callable[[Trial], None] | None = None,
        watch: Watch | None = None,
    ) -> list[Trial]:
        """Run trials side by side, as many at once as the GPUs hold (one at a time without).

        ``on_done`` is called with each trial as soon as it is final (not when all are);
        ``watch`` judges each trial's progress, and a decision stops that trial as pruned.
        """

        async def run(trial: Trial, slot: GpuSlot | None) -> Trial:
            done = await self._run_one(trial, slot, watch)
            if on_done is not None:
                on_done(done)
            return done

        return await run_parallel(trials, run, self.pool, placement=placement)

    async def many(self, trials: list[Trial]) -> list[Trial]:
        """Run trials of one config on one engine (one slot), one workload after another."""
        if not trials:
            return []

        async def on_slot(first: Trial, slot: GpuSlot | None) -> Trial:
            name = _slot_name(slot)
            self.progress.slot_start(name, first, tuple(trials[1:]), gpus=_slot_gpus(slot))
            try:
                kwargs = await self._pinned(first.config, slot)
                done = await run_workloads(trials, self.store, on_event=self._emit, **kwargs)
            finally:
                self.progress.slot_end(name, first)
            return done[0]

        await run_parallel([trials[0]], on_slot, self.pool)
        return trials


def _slot_gpus(slot: GpuSlot | None) -> tuple[int, ...]:
    """The slot's GPU indices for the GPU panel; empty without GPUs or for non-integer ids."""
    return tuple(slot.indices or ()) if slot is not None else ()


def _slot_name(slot: GpuSlot | None) -> str:
    """``GPU 0`` / ``GPU 0,1`` for a slot; ``engine`` without GPUs (one at a time)."""
    return f"GPU {slot.visible}" if slot is not None else "engine"
