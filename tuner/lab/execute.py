"""The one way any face runs a study: a plan (tuner.lab.plans) on the node's trial runner.

``tunelab ab``/``sweep``/``tune``/``capacity``/``ablate``/``presets verify``,
the TUI's A/B, sweep and capacity, and the study service's jobs all call
:func:`execute`. It names the study, writes the plan into the store beside
the study's trials (so a later report, compare or export reads the design the
study ran with: :func:`stored_plan`), and runs it on the runner the face was
given by :func:`tuner.cli.study_session.node_runner` or
:func:`tuner.lab.run.runner` — the runner that carries the node's telemetry,
GPU pool and guard.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from tuner.lab.plans import (
    AblationPlan,
    ABPlan,
    CapacityPlan,
    CapacitySearchPlan,
    Hooks,
    Plan,
    SearchPlan,
    SweepPlan,
    VerifyPlan,
    named,
)

if TYPE_CHECKING:
    from tuner.studies.executor import TrialRunner
    from tuner.trials.store import TrialStore

R = TypeVar("R")

# The study setting a plan is kept under: one per kind, the last one run.
PLAN_KEY = "plan:{kind}"
PLAN_KINDS = tuple(
    p.kind
    for p in (
        ABPlan,
        SweepPlan,
        SearchPlan,
        CapacitySearchPlan,
        CapacityPlan,
        AblationPlan,
        VerifyPlan,
    )
)
# What a plan's summary leaves out: the configs, workload and space are the trials' own.
_NOT_DESIGN = frozenset({"kind", "study", "a", "b", "base", "config", "workload", "space"})


async def execute(plan: Plan[R], runner: TrialRunner, hooks: Hooks | None = None) -> R:
    """Runs ``plan`` on ``runner`` and returns its report; the plan is stored with its study.

    Raises:
        TunelabError: the study's own input errors (exit 2) and failures, as the study raises them.
    """
    plan = named(plan)
    remember(runner.store, plan)
    return await plan.run(runner, hooks or Hooks())


def remember(store: TrialStore, plan: Plan[Any]) -> None:
    """Writes ``plan`` (its study named) into ``store`` under its study."""
    if plan.study:
        store.set_study_setting(
            plan.study, PLAN_KEY.format(kind=plan.kind), json.dumps(plan.to_dict())
        )


def stored_plan(store: TrialStore, study: str, kind: str) -> dict[str, Any] | None:
    """The last plan of ``kind`` run in ``study``, as stored (None: none, or unreadable)."""
    raw = store.study_setting(study, PLAN_KEY.format(kind=kind))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("kind") == kind else None


def stored_plans(store: TrialStore, study: str) -> dict[str, dict[str, Any]]:
    """Every kind of plan ``study`` ran, its last one each, by kind (in PLAN_KINDS order)."""
    found = {kind: stored_plan(store, study, kind) for kind in PLAN_KINDS}
    return {kind: plan for kind, plan in found.items() if plan is not None}


def describe(plan: dict[str, Any]) -> str:
    """A stored plan's design on one line, ``ab: repeats=3 order=abba confidence=0.95 ...``.

    The configs, workload and space are left out (each trial shows its own).
    """
    parts = [
        f"{key}={_text(value)}"
        for key, value in plan.items()
        if key not in _NOT_DESIGN and value not in (None, [], {})
    ]
    return f"{plan.get('kind')}: {' '.join(parts)}"


def _text(value: Any) -> str:
    if isinstance(value, dict) and "key" in value:  # a swept knob
        return str(value["key"])
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={_text(v)}" for k, v in value.items()) + "}"
    return str(value)
