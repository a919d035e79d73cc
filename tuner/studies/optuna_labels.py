"""Names and a note on a tunelab Optuna study, so optuna-dashboard shows what it is.

Optuna stores objectives as bare ``values[0]``, ``values[1]``; a dashboard
pointed at tunelab's storage would show "Objective 0" and nothing about the
model, the workload or the SLO. The first worker of a study therefore names
the objectives (``Study.set_metric_names``) and writes a Markdown study note
through optuna-dashboard's own ``save_note`` (its storage format is the
dashboard's, so it is written by its code, not copied). Later workers and
resumes find the names set and leave both alone.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna


def label_study(study: optuna.Study, objectives: Sequence[str], setup: dict[str, Any]) -> bool:
    """Name the objectives and write the study note once; True when this call wrote them.

    Args:
        study: The Optuna study (fresh or resumed).
        objectives: Result keys in the study's direction order.
        setup: What the study measures (model, base config, workload, space, SLO).
    """
    # Deferred: heavy (optuna): loaded only on the path that needs it.
    import optuna

    if study.metric_names is not None:
        return False
    with warnings.catch_warnings():
        # set_metric_names is marked experimental in Optuna 5; the names it stores are plain.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(list(objectives))
    with contextlib.suppress(ImportError):
        # Deferred: optuna-dashboard is only needed to write the note.
        from optuna_dashboard import save_note

        save_note(study, study_note(study.study_name, objectives, setup))
    return True


def study_note(name: str, objectives: Sequence[str], setup: dict[str, Any]) -> str:
    """The Markdown note: what the study optimises, on what, under which constraints."""
    workload = setup.get("workload") or {}
    space = setup.get("space") or {}
    lines = [
        f"## tunelab study `{name}`",
        "",
        f"- **objectives**: {', '.join(f'`{o}`' for o in objectives)}",
        f"- **model**: `{setup.get('model', '?')}`",
        f"- **base config**: `{setup.get('base_config', '?')}`",
    ]
    shown = {k: v for k, v in workload.items() if v is not None and k != "slo"}
    if shown:
        lines.append("- **workload**: " + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    params = space.get("params") or []
    if params:
        keys = [str(p.get("key", p)) if isinstance(p, dict) else str(p) for p in params]
        lines.append("- **parameters**: " + ", ".join(f"`{k}`" for k in keys))
    constraints = space.get("constraints") or []
    if constraints:
        lines.append("- **SLO**: " + ", ".join(f"`{c}`" for c in constraints))
    lines += [
        "",
        "Each Optuna trial is one engine launch; its tunelab trial id is the user attr "
        "`tunelab_trial_id` (`tunelab show ID` prints it with its log and telemetry).",
    ]
    return "\n".join(lines) + "\n"
