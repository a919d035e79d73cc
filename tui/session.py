"""The state one TUI session edits: config, workload, target, findings, trials.

Screens read and replace these fields; nothing here computes anything — the
values come from ``tuner`` (rules, introspection, model analysis, trials).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tui.services import Services
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Finding, Target

# A short default workload: seconds on the CPU engine, long enough to read a trend.
DEFAULT_WORKLOAD = Workload(
    input_len=128, output_len=64, num_prompts=32, concurrency=8, warmup_requests=4
)


@dataclass
class Session:
    """Everything the screens share.

    Attributes:
        services: The app's boundaries (see :mod:`tui.services`).
        config: The config being edited.
        model_label: What the model input shows (e.g. ``tunelab:demo`` for the demo path).
        workload: The current workload; None while a field is invalid.
        workload_error: Why the workload is invalid.
        target: Version/platform/GPUs the rules check against (refined by introspection).
        vllm_info: The introspection answer, once known.
        model_info: The analyzed model, once known.
        findings: The rules' findings on ``config``.
        study: The study name trials of this session are stored under.
        baseline_id: The trial A/B compares against (default: the first done trial).
        trials: Trials of this session's study, newest last (mirrors the store).
        last_ab: The last A/B result (``tuner.studies`` object), for the compare view.
        gpu_count: GPUs seen by telemetry (0: none).
    """

    services: Services
    config: EngineConfig
    model_label: str | None = None
    workload: Workload | None = DEFAULT_WORKLOAD
    workload_error: str | None = None
    target: Target = field(default_factory=Target)
    vllm_info: Any = None
    model_info: Any = None
    findings: list[Finding] = field(default_factory=list)
    study: str = "tui"
    baseline_id: str | None = None
    trials: list[Any] = field(default_factory=list)
    last_ab: Any = None
    gpu_count: int | None = None
