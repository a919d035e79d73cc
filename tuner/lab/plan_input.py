"""The text a face types for a plan, read once: knobs to sweep, SLO bounds, a search space.

``tunelab sweep``/``tune``/``capacity`` and the TUI read their ``KEY=V1,V2``,
``METRIC<=VALUE`` and ``--space FILE`` text here, so a value refused by one
face is refused by the other with the same message. Every function raises a
:class:`~tuner.errors.TunelabError` (message + fix, exit 2) before any engine
starts; the faces print it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.lab.plans import PlanError
from tuner.studies.search import objectives_for
from tuner.studies.slo import SLO, check_constraint, parse_slo
from tuner.studies.space import (
    WORKLOAD_KEYS,
    Constraint,
    Param,
    Space,
    load_space,
    parse_constraint,
    parse_param,
)

# `tune --objective capacity`: each point is one capacity launch (tuner.studies.capacity_search).
CAPACITY = "capacity"
TUNE_OBJECTIVES = ("throughput", "latency", "pareto", CAPACITY)

__all__ = [
    "CAPACITY",
    "TUNE_OBJECTIVES",
    "Constraint",
    "Param",
    "Space",
    "constraint",
    "param",
    "slo",
    "sweep_params",
    "swept_values",
    "tune_space",
    "without_workload_keys",
]


def param(text: str) -> Param:
    """``KEY=V1,V2,...`` or ``KEY=LOW:HIGH[:STEP]`` as a knob with its values listed (checked)."""
    found = parse_param(text)
    found.values()  # a range that cannot be listed is refused here, before any trial
    return found


def sweep_params(spec: str, descent: Sequence[str] = ()) -> tuple[Param, ...]:
    """The swept knob and the ``--descent`` ones, each knob once."""
    params = (param(spec), *(param(d) for d in descent))
    keys = [p.key for p in params]
    if len(set(keys)) != len(keys):
        raise PlanError(f"a knob is listed twice: {', '.join(keys)}")
    return params


def swept_values(text: str) -> Param:
    """``--sweep KEY=V1,V2,...`` of a capacity sweep: two or more listed values."""
    found = param(text)
    if found.kind != "categorical":
        raise PlanError(f"--sweep takes listed values (KEY=V1,V2,...), not a range: {text!r}")
    if len(found.values()) < 2:
        raise PlanError(f"--sweep needs two or more values of {found.key}: {found.key}=V1,V2")
    return found


def constraint(text: str) -> Constraint:
    """``METRIC<=VALUE`` on a result key, its metric and bound checked (tuner.studies.slo)."""
    return check_constraint(parse_constraint(text))


def slo(text: str) -> SLO:
    """A capacity SLO, ``p99_ttft_ms<=500,p99_itl_ms<=50``: bounds every probe must meet."""
    return parse_slo(text)


def tune_space(
    objective: str,
    latency_metric: str,
    space_file: Path | None,
    params: Sequence[str],
    constraints: Sequence[Constraint],
) -> Space:
    """The search space: the file's, then ``--param``, then the ``--slo`` bounds.

    With ``objective`` capacity the bounds are the capacity's SLO, not constraints
    on the points, so they are left out here.
    """
    if objective not in TUNE_OBJECTIVES:
        raise PlanError(
            f"--objective must be throughput, latency, pareto or capacity, not {objective!r}"
        )
    if space_file is None and not params:
        raise PlanError("nothing to search: give --space FILE or --param KEY=V1,V2,...")
    space = load_space(space_file) if space_file else Space()
    for bound in space.constraints:  # a file's bounds meet the checks --slo's do
        check_constraint(bound)
    extra = [parse_param(p) for p in params]
    if objective == CAPACITY:
        return Space([*space.params, *extra], list(space.constraints), dict(space.fixed))
    objectives_for(objective, latency_metric)  # type: ignore[arg-type]
    return Space([*space.params, *extra], [*space.constraints, *constraints], dict(space.fixed))


def without_workload_keys(fixed: dict[str, Any]) -> dict[str, Any]:
    """A space's fixed values that are engine knobs (its workload keys are the workload's)."""
    return {k: v for k, v in fixed.items() if k not in WORKLOAD_KEYS}
