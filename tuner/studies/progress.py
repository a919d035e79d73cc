"""A study's progress: launches done/total, waves, per-slot state, elapsed and an ETA.

The trial runner of a study (:class:`tuner.studies.executor.TrialRunner`)
owns one :class:`StudyTracker`. The study code says what it plans (``begin``,
``wave``, ``extend``); the runner says which trial holds which slot; every
trial event passes through ``observe``. The tracker turns that into
:class:`tuner.trials.events.StudyStatus` events on the runner's callback, so
the CLI's Rich display and the TUI show the same figures and compute none.

The ETA is a model, not a guess from the bar's speed: with ``L`` the mean
wall time of the launches finished so far (slot taken to trial final),
``S`` the slots, each running trial needing ``max(L - elapsed, 0)`` more and
each queued one ``L``, the time left is that work spread over the slots that
can take it, ``sum / min(S, running + queued)``. It is None until a launch
has finished; for a sequential A/B it is the most the A/B can take.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.studies.common import describe_values
from tuner.trials.events import (
    SlotState,
    StudyStatus,
    TrialDone,
    TrialEvent,
    TrialFailed,
    TrialProgress,
    TrialPruned,
    TrialSkipped,
    TrialStage,
)
from tuner.trials.model import Trial

# While trials measure, a status at most this often (stage changes and ends: always).
PROGRESS_EVERY_S = 1.0


def trial_label(trial: Trial) -> str:
    """What a trial is, in a few characters: ``A1``, ``max-num-seqs=8``, ``#3 ...``."""
    if trial.arm:
        return trial.arm_label
    values = trial.tags.get("values")
    text = describe_values(values) if isinstance(values, dict) else trial.short_id
    number = trial.tags.get("optuna_number")
    return f"#{number} {text}" if number is not None else text


@dataclass
class _Slot:
    name: str
    trial: Trial | None = None
    stage: str = "idle"
    since: float = 0.0
    gpus: tuple[int, ...] = ()
    done: int | None = None
    total: int | None = None

    def state(self) -> SlotState:
        trial = self.trial
        return SlotState(
            self.name,
            trial.id if trial else None,
            trial_label(trial) if trial else "",
            self.stage if trial else "idle",
            self.done,
            self.total,
            self.gpus,
        )


@dataclass
class StudyTracker:
    """Counts a study's launches and slots and emits :class:`StudyStatus` events.

    Attributes:
        emit: Where the events go (the runner's callback); None: nowhere.
        clock: Monotonic seconds (a parameter so tests can drive time).
    """

    emit: Callable[[TrialEvent], None] | None = None
    clock: Callable[[], float] = time.monotonic
    study: str = ""
    kind: str = ""
    total: int = 0
    slot_count: int = 1
    wave_now: int | None = None
    waves: int | None = None
    note: str = ""
    done: int = 0
    pruned: int = 0
    failed: int = 0
    started: int = 0
    _t0: float = 0.0
    _durations: list[float] = field(default_factory=list)
    _slots: dict[str, _Slot] = field(default_factory=dict)
    _where: dict[str, str] = field(default_factory=dict)
    _trials: dict[str, Trial] = field(default_factory=dict)
    _final: set[str] = field(default_factory=set)
    _last: float = -math.inf

    # -- what the study says ----------------------------------------------------------
    def begin(
        self, study: str, kind: str, total: int, slots: int, waves: int | None = None
    ) -> None:
        """A study starts: ``total`` trials planned on ``slots`` slots (``waves`` if it has them)."""
        self.study, self.kind, self.total = study, kind, max(0, total)
        self.slot_count, self.waves = max(1, slots), waves
        self._t0 = self.clock()
        self.send()

    def wave(self, index: int, waves: int | None = None, note: str = "") -> None:
        """Wave ``index`` (0-based) of ``waves`` begins; ``note`` says what it is."""
        self.wave_now = index + 1
        if waves is not None:
            self.waves = waves
        if note:
            self.note = note
        self.send()

    def extend(self, extra: int) -> None:
        """``extra`` more trials than planned (a search's rule-skipped points)."""
        self.total += extra
        self.send()

    def say(self, note: str) -> None:
        """Replace the one-line note (e.g. an A/B look's decision)."""
        self.note = note
        self.send()

    # -- what the runner says -----------------------------------------------------------
    def slot_start(
        self, slot: str, trial: Trial, also: tuple[Trial, ...] = (), gpus: tuple[int, ...] = ()
    ) -> None:
        """``trial`` took ``slot`` on GPUs ``gpus`` (``also``: more trials on the same engine)."""
        self._slots[slot] = _Slot(slot, trial, "queued", self.clock(), gpus)
        for member in (trial, *also):
            self._where[member.id] = slot
            self._trials[member.id] = member
        self.started += 1 + len(also)
        self.send()

    def slot_end(self, slot: str, trial: Trial) -> None:
        """``trial`` gave ``slot`` back (final, or cancelled)."""
        held = self._slots.get(slot)
        if held is not None and held.trial is not None:
            if trial.id in self._final or held.trial.id in self._final:
                self._durations.append(self.clock() - held.since)
            self._slots[slot] = _Slot(slot, gpus=held.gpus)
        for trial_id in [t for t, name in self._where.items() if name == slot]:
            self._where.pop(trial_id, None)
            self._trials.pop(trial_id, None)
        self.send()

    def observe(self, event: TrialEvent) -> None:
        """Fold one trial event into the slots and counters."""
        if isinstance(event, TrialStage):
            slot = self._slot_of(event.trial_id)
            if slot is not None:
                slot.stage = event.stage
                slot.trial = self._trials.get(event.trial_id, slot.trial)  # a shared engine's next
                self.send()
        elif isinstance(event, TrialProgress):
            slot = self._slot_of(event.trial_id)
            if slot is not None:
                slot.done, slot.total = event.progress.done, event.progress.total
                self.send(throttled=True)
        elif isinstance(event, TrialDone | TrialFailed | TrialSkipped | TrialPruned):
            self._finished(event)

    def _finished(self, event: TrialDone | TrialFailed | TrialSkipped | TrialPruned) -> None:
        trial = event.trial
        if trial.id in self._final:
            return
        self._final.add(trial.id)
        self.done += 1
        self.pruned += isinstance(event, TrialPruned)
        self.failed += isinstance(event, TrialFailed)
        self.send()

    def _slot_of(self, trial_id: str) -> _Slot | None:
        name = self._where.get(trial_id)
        return self._slots.get(name) if name is not None else None

    # -- the figures -------------------------------------------------------------------
    @property
    def running(self) -> int:
        return sum(1 for s in self._slots.values() if s.trial is not None)

    def eta(self) -> float | None:
        """Seconds left by the launch-time model (None before a launch has finished)."""
        if not self._durations:
            return None
        mean = sum(self._durations) / len(self._durations)
        now = self.clock()
        busy = [s for s in self._slots.values() if s.trial is not None]
        queued = max(0, self.total - self.done - len(busy))
        work = sum(max(mean - (now - s.since), 0.0) for s in busy) + queued * mean
        lanes = min(self.slot_count, len(busy) + queued)
        return work / lanes if lanes else 0.0

    def status(self) -> StudyStatus:
        """The study's state now."""
        waves = self.waves
        wave = self.wave_now
        if waves is None and self.total:
            waves = math.ceil(self.total / self.slot_count)
            wave = min(waves, max(1, math.ceil(self.started / self.slot_count)))
        return StudyStatus(
            study=self.study,
            kind=self.kind,
            done=self.done,
            total=self.total,
            running=self.running,
            pruned=self.pruned,
            failed=self.failed,
            wave=wave,
            waves=waves,
            slots=tuple(s.state() for s in self._slots.values()),
            elapsed_s=self.clock() - self._t0,
            eta_s=self.eta(),
            note=self.note,
        )

    def send(self, throttled: bool = False) -> None:
        """Emit the status (a throttled call at most every PROGRESS_EVERY_S)."""
        if self.emit is None or not self.kind:
            return
        now = self.clock()
        if throttled and now - self._last < PROGRESS_EVERY_S:
            return
        self._last = now
        self.emit(self.status())
