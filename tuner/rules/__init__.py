"""The rules engine: findings about a config on a target, never an exception.

``check(config, model, target, workload)`` runs every registered rule (one
module per theme: AITER, attention, CUDA graphs, quantization, batching,
memory, parallelism, environment, and the policy's refusals) and returns findings sorted errors first.
A rule that crashes becomes an internal warning finding, so a bug in one rule
can never block a run or hide the others. Sources come back with reference
documents named by title (:func:`tuner.knobs.references.cite`).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Sequence
from dataclasses import replace

from tuner.config import EngineConfig
from tuner.knobs.references import cite
from tuner.model.info import ModelInfo
from tuner.rules import (
    aiter,
    attention,
    backends,
    batching,
    cudagraph,
    environment,
    hardware,
    memory,
    parallel,
    policy,
    quantization,
    serving,
)
from tuner.rules.base import RULES, Context, Rule
from tuner.rules.types import GOALS, Finding, Severity, Target, WorkloadShape

_THEMES = (
    aiter,
    attention,
    backends,
    batching,
    cudagraph,
    environment,
    hardware,
    memory,
    parallel,
    policy,
    quantization,
    serving,
)

__all__ = [
    "GOALS",
    "RULES",
    "Finding",
    "Rule",
    "Severity",
    "Target",
    "WorkloadShape",
    "blocking",
    "check",
    "has_errors",
]


def check(
    config: EngineConfig,
    model: ModelInfo | None,
    target: Target,
    workload: WorkloadShape | None = None,
) -> list[Finding]:
    """Every finding about ``config`` on ``target``, errors first; never raises.

    Args:
        config: The knob values.
        model: The analyzed model, or None (model-dependent rules stay silent).
        target: vLLM version, platform and GPUs the config is meant for.
        workload: What will be served (lengths, concurrency, goal), if known.
    """
    ctx = Context(config, model, target, workload)
    findings: list[Finding] = []
    for item in RULES:
        try:
            produced = list(item.fn(ctx))
        except Exception as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            findings.append(
                Finding(
                    Severity.WARNING,
                    (),
                    f"internal: rule {item.id} failed ({type(exc).__name__}: {exc} at "
                    f"{where.filename.rsplit('/', 1)[-1]}:{where.lineno}); its check was skipped",
                    "tunelab",
                    None,
                    "internal-error",
                )
            )
            continue
        # Sources name reference files in code; users read the documents' titles.
        findings.extend(
            replace(f, rule=f.rule or item.id, source=cite(f.source), message=cite(f.message))
            for f in _validated(ctx, produced)
        )
    findings.sort(key=lambda f: f.severity.rank)
    return findings


def _validated(ctx: Context, produced: Sequence[Finding]) -> Iterator[Finding]:
    """Only fixes vLLM would start with: a fix that sets a backend vLLM's own checks refuse
    is withdrawn from an error (which still stands) and drops advice or a warning whose
    point was that fix."""
    for f in produced:
        why = backends.fix_refusal(ctx, f.fix) if f.fix else None
        if why is None:
            yield f
        elif f.severity is Severity.ERROR:
            yield replace(f, fix=None, message=f"{f.message} (no fix offered: vLLM refuses {why})")


def blocking(findings: Sequence[Finding]) -> list[Finding]:
    """The findings that block a run (the errors), in their order."""
    return [f for f in findings if f.severity is Severity.ERROR]


def has_errors(findings: Sequence[Finding]) -> bool:
    """True when any finding blocks a run."""
    return bool(blocking(findings))
