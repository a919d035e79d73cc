"""The state one TUI session edits: config, workload, target, findings, trials.

Screens read and replace these fields; nothing here computes anything — the
values come from ``tuner`` (rules, introspection, model analysis, trials).
The baseline and the last A/B are not here: they belong to the study and are
kept in the trial store (``tuner.lab.study``), so they survive a restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.services import Services
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.introspect import VllmInfo
from tuner.lab.checks import VllmVerdict
from tuner.model import ModelInfo
from tuner.rules import Finding, Target
from tuner.trials.model import Trial

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
        vllm_info: The introspection answer, once known (None also when it failed).
        model_info: The analyzed model, once known.
        findings: The rules' findings on ``config`` (invalid knob text included, as errors).
        invalid: Knob key -> why the text typed into it is not a value (until corrected).
        study: The study name trials of this session are stored under.
        trials: Trials this session finished, newest last (the store has the whole study).
        gpu_count: GPUs seen by telemetry (0: none).
        preview: Another node's target the rules judge against instead of this one
            (``tunelab tui --gpu MI300X``, the ``g`` dialog); runs still run here.
        verdict: The installed vLLM's own validation of a config (``v``); its findings
            join the rules' while the config is the one it was asked about.
    """

    services: Services
    config: EngineConfig
    model_label: str | None = None
    workload: Workload | None = DEFAULT_WORKLOAD
    workload_error: str | None = None
    target: Target = field(default_factory=Target)
    vllm_info: VllmInfo | None = None
    model_info: ModelInfo | None = None
    findings: list[Finding] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)
    study: str = "tui"
    trials: list[Trial] = field(default_factory=list)
    gpu_count: int | None = None
    preview: Target | None = None
    verdict: VllmVerdict | None = None

    @property
    def rules_target(self) -> Target:
        """What findings, ⊘ marks and the fit are judged against: the preview, else this node."""
        return self.preview or self.target
