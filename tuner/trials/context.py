"""What the rules judge a trial against: the installed vLLM (the target) and the model.

Resolving the target introspects the engine's interpreter in a subprocess
(cached per installation), and the model is analyzed offline from its
``config.json``; neither ever raises for a missing piece, because a trial
whose model cannot be analyzed still runs — only the model-specific rules
stay silent, and the notes say so.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.model import ModelInfo
    from tuner.rules import Target
    from tuner.trials.model import Trial


@dataclass
class RunContext:
    """What the rules need to judge a config here: the target and the model."""

    target: Target
    model_info: ModelInfo | None
    notes: list[str]


def resolve_context(model: str, python: str = sys.executable) -> RunContext:
    """The installed vLLM as the target (introspected, cached) and the analyzed model.

    Blocking (introspection may run a subprocess the first time): call it from
    a thread in async code. Never raises for a missing vLLM or model; the
    notes say what could not be read.
    """
    from tuner.introspect import IntrospectError, introspect
    from tuner.rules import Target

    notes: list[str] = []
    try:
        info = introspect(python)
    except IntrospectError as exc:
        info = None
        notes.append(f"introspection failed ({exc}); rules used the catalogue only")
    if info is not None and info.available:
        target = Target.from_introspection(info)
    else:
        if info is not None:
            notes.append(f"no vLLM for {python} ({info.error})")
        target = Target(note="catalogue")
    return RunContext(target, analyze_model(model, notes), notes)


def analyze_model(model: str, notes: list[str] | None = None) -> ModelInfo | None:
    """The model's info for the rules, offline only; None (with a note) when unreadable."""
    from tuner.model import ModelError, analyze

    try:
        return analyze(model, offline=True)
    except ModelError as exc:
        if notes is not None:
            notes.append(f"model not analyzed ({exc}); model-specific rules were skipped")
        return None


def check_trial(trial: Trial, context: RunContext) -> list[dict[str, Any]]:
    """The rule findings for the trial's config and workload, as dicts (errors first)."""
    from tuner.rules import WorkloadShape, check

    found = check(
        trial.config,
        context.model_info,
        context.target,
        WorkloadShape.from_workload(trial.workload),
    )
    return [f.to_dict() for f in found]
