"""What a running trial tells its watchers, as small immutable messages.

The CLI's progress display and the TUI subscribe to these instead of polling
the store or the log file. They mirror the engine's own events one level up:
a trial adds the rules verdict, the stages of a run (start, warm-up,
measurement, stop) and the benchmark's progress, and ends with exactly one of
done, failed, skipped or pruned (stopped early by a study, see
:mod:`tuner.studies.pruning`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tuner.bench.progress import BenchProgress
    from tuner.trials.model import Trial

Stage = Literal["starting", "ready", "warmup", "measuring", "stopping"]
STAGES: tuple[str, ...] = ("starting", "ready", "warmup", "measuring", "stopping")


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
            requests in flight), measuring (counted requests), stopping
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
    """The rules found errors; no engine was started."""

    trial: Trial
    findings: tuple[dict[str, object], ...]


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
)
TrialEventCallback = Callable[[TrialEvent], None]
