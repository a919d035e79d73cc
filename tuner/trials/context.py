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
from typing import TYPE_CHECKING

from tuner.engine.effective import RULE_ID
from tuner.introspect import IntrospectError, introspect
from tuner.model import ModelError, analyze
from tuner.rules import Finding, Severity, Target, WorkloadShape, check
from tuner.rules.node_target import NodeGpus, from_introspection, read_node_gpus, with_node_gpus
from tuner.trials.slots import SlotError, forced_gpu_count

if TYPE_CHECKING:
    from tuner.engine.effective import EffectiveConfig
    from tuner.model import ModelInfo
    from tuner.trials.model import Trial


@dataclass
class RunContext:
    """What the rules need to judge a config here: the target and the model."""

    target: Target
    model_info: ModelInfo | None
    notes: list[str]


# Target per interpreter, resolved once per process: introspection's own
# cache still runs a locating subprocess (~0.3-1 s) on each call, which a
# study of many trials must not pay per trial.
_TARGETS: dict[str, tuple[Target, tuple[str, ...]]] = {}


def resolve_context(
    model: str, python: str = sys.executable, *, refresh: bool = False
) -> RunContext:
    """The installed vLLM and this node's GPUs as the target, and the analyzed model.

    Blocking (introspection may run a subprocess): call it from a thread in
    async code. The target is remembered per interpreter for the life of the
    process (``refresh`` re-reads it). Never raises for a missing vLLM or
    model; the notes say what could not be read.
    """
    if refresh or python not in _TARGETS:
        _TARGETS[python] = _resolve_target(python)
    target, target_notes = _TARGETS[python]
    notes = list(target_notes)
    return RunContext(target, analyze_model(model, notes), notes)


def _resolve_target(python: str) -> tuple[Target, tuple[str, ...]]:
    """This node's target (tuner.rules.node_target: the TUI's rule), and notes on it."""
    notes: list[str] = []
    try:
        info = introspect(python)
    except IntrospectError as exc:
        info = None
        notes.append(f"introspection failed ({exc}); rules used the catalogue only")
    if info is not None and info.available:
        target = from_introspection(info)
    else:
        if info is not None:
            notes.append(f"no vLLM for {python} ({info.error})")
        target = Target(note="catalogue")
    return with_node_gpus(target, _node_gpus(notes)), tuple(notes)


def _node_gpus(notes: list[str]) -> NodeGpus:
    """The node's GPUs for the rules, read through telemetry once: its count (unless one is
    forced, as the slots' is), one GPU's memory, model and partition."""
    try:
        forced = forced_gpu_count()
    except SlotError as exc:
        notes.append(str(exc))
        return NodeGpus()
    return read_node_gpus(forced)


def analyze_model(model: str, notes: list[str] | None = None) -> ModelInfo | None:
    """The model's info for the rules, offline only; None (with a note) when unreadable."""
    try:
        return analyze(model, offline=True)
    except ModelError as exc:
        if notes is not None:
            notes.append(f"model not analyzed ({exc}); model-specific rules were skipped")
        return None


def check_trial(trial: Trial, context: RunContext) -> list[Finding]:
    """The rule findings for the trial's config and workload (errors first)."""
    found = check(
        trial.config,
        context.model_info,
        context.target,
        WorkloadShape.from_workload(trial.workload),
    )
    return list(found)


def mismatch_findings(ran: EffectiveConfig) -> list[Finding]:
    """Each knob vLLM ran otherwise than asked, as a warning (show, run, ab and the TUI list it)."""
    return [
        Finding(
            severity=Severity.WARNING,
            knobs=(m.knob,),
            message=m.message(),
            source="vLLM's start-up log (requested vs effective)",
            fix=None,
            rule=RULE_ID,
        )
        for m in ran.mismatches
    ]
