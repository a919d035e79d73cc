"""What a running trial tells its watchers, as small immutable messages.

The CLI's progress display and the TUI subscribe to these instead of polling
the store or the log file. They mirror the engine's own events one level up:
a trial adds the rules verdict, the stages of a run (start, warm-up,
measurement, stop) and the benchmark's progress, and ends with exactly one of
done, failed, skipped or pruned (stopped early by a study, see
:mod:`tuner.studies.pruning`). A study running trials adds ``StudyStatus``
(launches done/total, waves, per-slot state, elapsed, ETA) through the same
callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.rules.types import Finding
    from tuner.trials.model import Trial

Stage = Literal["starting", "ready", "warmup", "measuring", "profiling", "stopping"]
STAGES: tuple[str, ...] = ("starting", "ready", "warmup", "measuring", "profiling", "stopping")


@dataclass(frozen=True)
class TrialQueued:
    """The trial is in the store and waits for its turn."""

    trial_id: str
    study: str


@dataclass(frozen=True)
class TrialStage:
    """The trial entered a stage of its run.

    Attributes:
        trial_id: The trial.
        stage: starting (engine launching), ready (healthy), warmup (warm-up
            requests in flight), measuring (counted requests), profiling (a
            profiled window after the measured run, issue 29), stopping
            (engine teardown).
        detail: A short human note (e.g. the URL once ready, the GPU slot).
    """

    trial_id: str
    stage: Stage
    detail: str = ""


@dataclass(frozen=True)
class TrialProgress:
    """Benchmark progress of the measured run (throttled to ~10 a second)."""

    trial_id: str
    progress: BenchProgress


@dataclass(frozen=True)
class TrialLog:
    """One line of the engine's log."""

    trial_id: str
    line: str


@dataclass(frozen=True)
class TrialBackend:
    """The attention backend asked for (None: vLLM's choice) and the one vLLM used."""

    trial_id: str
    requested: str | None
    actual: str | None
    inferred: bool = False


@dataclass(frozen=True)
class TrialDone:
    """The trial finished with results."""

    trial: Trial


@dataclass(frozen=True)
class TrialFailed:
    """The trial failed (engine did not start, crashed, or the benchmark broke)."""

    trial: Trial
    reason: str


@dataclass(frozen=True)
class TrialPruned:
    """The trial was stopped early: its interim throughput was clearly dominated.

    Final like done/failed/skipped: the engine is stopped, the trial is stored
    with ``tags["pruned"]`` (the decision) and a reason starting ``pruned:``.
    """

    trial: Trial
    reason: str


@dataclass(frozen=True)
class TrialSkipped:
    """No engine was started: the rules found errors (``findings``), or a search's study
    model was sure the point misses the SLO (``reason`` says so, no findings)."""

    trial: Trial
    findings: tuple[Finding, ...]
    reason: str = "the rules found errors; no engine was started"


@dataclass(frozen=True)
class SlotState:
    """What one GPU slot (or, without GPUs, the one engine) is doing, for a study's display.

    Attributes:
        slot: ``GPU 0`` / ``GPU 0,1`` (its CUDA_VISIBLE_DEVICES), or ``engine``
            without GPUs.
        trial_id: The trial on it (None: idle).
        label: What the trial is, short: ``A1`` (arm and repeat), the swept
            values, or the search point number.
        stage: The trial's stage (``starting``, ``ready``, ``warmup``,
            ``measuring``, ``stopping``), or ``idle``.
        requests_done, requests_total: The measured run's progress (None
            before it starts; total None for duration-bound runs).
        gpus: The slot's GPU indices (empty without GPUs, or when its devices
            are not integer indices, e.g. UUIDs).
    """

    slot: str
    trial_id: str | None
    label: str
    stage: str
    requests_done: int | None = None
    requests_total: int | None = None
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class StudyStatus:
    """Where a study (A/B, sweep, search) stands: launches, waves, slots, elapsed and ETA.

    Emitted by :class:`tuner.studies.progress.StudyTracker` through the same
    callback as the trial events, whenever a slot changes, a trial ends or a
    wave begins (and at most once a second while trials measure). The CLI's
    study bar and the TUI render it; neither computes anything from it.

    Attributes:
        study: The study name.
        kind: ``ab``, ``sweep`` or ``tune``.
        done: Trials final (done, failed, skipped or pruned).
        total: Trials planned. For a sequential A/B the most it may run
            (it stops early when the verdict is clear); a search adds
            rule-skipped points (they cost no launch and do not count).
        running: Trials on a slot now.
        pruned: Trials stopped early as dominated.
        failed: Trials that failed.
        wave: The current wave (1-based): an A/B's round of side-by-side
            pairs; for a sweep or a search the round of slot-fulls.
        waves: Waves planned (an upper bound for a sequential A/B).
        slots: One state per slot, in slot order.
        elapsed_s: Seconds since the study began.
        eta_s: Seconds left, estimated from the launches finished so far
            (mean launch time, the running trials' progress and the free
            slots); None until a launch has finished.
        note: One line of context (e.g. the A/B's last look, the swept knob).
    """

    study: str
    kind: str
    done: int
    total: int
    running: int
    pruned: int
    failed: int
    wave: int | None
    waves: int | None
    slots: tuple[SlotState, ...]
    elapsed_s: float
    eta_s: float | None
    note: str = ""

    def by_gpu(self) -> dict[int, SlotState]:
        """GPU index -> the busy slot holding it (the GPU panel marks these; idle slots left out)."""
        return {gpu: slot for slot in self.slots if slot.trial_id for gpu in slot.gpus}


TrialEvent = (
    TrialQueued
    | TrialStage
    | TrialProgress
    | TrialLog
    | TrialBackend
    | TrialDone
    | TrialFailed
    | TrialSkipped
    | TrialPruned
    | StudyStatus
)
TrialEventCallback = Callable[[TrialEvent], None]
