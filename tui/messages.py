"""The messages the TUI's widgets and workers post upward, as dataclasses.

Textual's rule is "attributes down, messages up": screens set widget
attributes, widgets and background workers report with these messages. Each
one is a frozen-by-convention dataclass so a test can record them with
``message_hook`` and compare fields. Workers post them from threads with
``post_message``, which is thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, TypeAlias

from textual.message import Message

from tuner.bench.workload import Workload
from tuner.config import EngineConfig, EngineValue
from tuner.introspect import VllmInfo
from tuner.lab.checks import VllmVerdict
from tuner.model import ModelInfo
from tuner.rules import Target
from tuner.trials.events import TrialEvent
from tuner.trials.model import Trial

if TYPE_CHECKING:  # the study modules stay off start-up: nothing here needs them at run time
    from tuner.studies.ab import ABReport
    from tuner.studies.capacity import CapacityReport
    from tuner.studies.sweep import SweepReport


class JobKind(StrEnum):
    """What a background job does."""

    RUN = "run"
    AB = "ab"
    SWEEP = "sweep"
    CAPACITY = "capacity"


# What a finished job hands back: the trial, or the A/B's, the sweep's or the capacity's report.
JobResult: TypeAlias = "Trial | ABReport | SweepReport | CapacityReport"


@dataclass
class KnobChanged(Message):
    """The user set (or cleared, value None) a knob in the knob panel."""

    key: str
    value: EngineValue | None


@dataclass
class KnobInvalid(Message):
    """Text typed into a knob's input does not parse; the message says why."""

    key: str
    error: str


@dataclass
class KnobFocused(Message):
    """A knob row got focus: its help text is shown."""

    key: str


@dataclass
class WorkloadChanged(Message):
    """The workload panel holds a new valid workload (or an error to show)."""

    workload: Workload | None
    error: str | None = None


@dataclass
class ModelRequested(Message):
    """The user typed or picked a model id or path."""

    model: str


@dataclass
class IntrospectionReady(Message):
    """The installed vLLM was probed (in a thread): version, platform, lists."""

    info: VllmInfo | None
    target: Target


@dataclass
class ModelAnalyzed(Message):
    """Model analysis finished: the info, or an error sentence."""

    model: str
    info: ModelInfo | None
    error: str | None = None


@dataclass
class TelemetryReady(Message):
    """The telemetry backend was selected (in a thread) and the sampler started."""

    description: str
    reasons: tuple[str, ...]
    count: int
    vram_gib: float | None = None
    gpu_name: str | None = None
    partition: str | None = None


@dataclass
class RunEvent(Message, bubble=False):
    """One event of a running trial or study, forwarded from the worker (the main screen's only).

    Attributes:
        job: The id of the job that produced it (a study may run several trials).
        event: The ``tuner.trials`` event (TrialStage, TrialProgress, ...).
        at: When it happened (wall clock) if not just now: an event replayed
            from a detached job's event file.
    """

    job: int
    event: TrialEvent
    at: float | None = None


@dataclass
class JobFinished(Message, bubble=False):
    """A run, A/B or sweep worker ended (done, failed or cancelled)."""

    job: int
    kind: JobKind
    ok: bool
    summary: str = ""
    result: JobResult | None = None
    kept: tuple[str, ...] = ()  # a stopped job's finished parts (a capacity's launches)


@dataclass
class ConfigLoaded(Message):
    """A starting config is ready (demo, --model or --preset), or why it is not."""

    config: EngineConfig | None
    label: str | None = None
    error: str | None = None


@dataclass
class VllmValidated(Message):
    """The installed vLLM answered ``v`` (tuner.lab.checks.ask_vllm), from a worker thread."""

    verdict: VllmVerdict
