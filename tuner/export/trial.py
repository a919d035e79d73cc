"""A stored trial as a preset: the measured config with its workload, results and noise.

Export of a trial must carry what was measured, how noisy it was and which
trial it was, so a preset found later can be traced back and re-measured.
The config is the trial's own ``EngineConfig`` (the one the engine started);
``[workload]`` is the benchmark workload; ``[results]`` holds the scalar
benchmark results (vLLM's key names), the telemetry summary and, when the
study ran the same config more than once (A/B repeats, sweep points), the
spread of the objective over those repeats under ``[results.noise]`` (and then
``objective_value`` is their mean, not this trial's), what vLLM ran where it
overrode a request under ``[results.ran]`` (named again atop every file), and
what the output-drift guard saw against the study's baseline under
``[results.guard]`` (verdict, probes, first divergence, mean |Δlogprob|): a
preset that changed the model's answers says so wherever it travels.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tuner.engine.aiter_shapes import merge
from tuner.engine.effective import of_trial
from tuner.export.aiter_untuned import shapes_of
from tuner.export.errors import ExportError
from tuner.export.preset import Preset, PresetTarget, Provenance, preset_from_config
from tuner.trials.guard_check import TrialGuard, baseline_trial, guard_of, guard_verdicts
from tuner.trials.model import Trial, TrialStatus, metric
from tuner.trials.noise import RepeatNoise
from tuner.trials.store import StoreError, TrialNotFound, TrialStore

# Long per-request arrays are not worth carrying in a preset.
_MAX_LIST = 64


def preset_from_trial(trial_id: str, *, store_path: str | Path | None = None) -> Preset:
    """The preset for trial ``trial_id`` (an id or a unique prefix).

    Raises:
        ExportError: the trial does not exist, is ambiguous, or has not finished.
    """
    try:
        with TrialStore(store_path) as store:
            trial = store.get(trial_id)
            repeats = store.repeats_of(trial)
            baseline = baseline_trial(store, trial.study)
    except TrialNotFound as exc:
        raise ExportError(str(exc)) from None
    except StoreError as exc:
        raise ExportError(f"cannot read the trial store: {exc}") from None
    if trial.status is not TrialStatus.DONE:
        raise ExportError(
            f"trial {trial.id} is {trial.status}, not done: only a finished trial has results to "
            "export; re-run it, or export its config with `tunelab check`/--preset"
        )
    return trial_preset(trial, repeats, baseline)


def trial_preset(trial: Trial, repeats: list[Trial], baseline: Trial | None = None) -> Preset:
    """Builds the preset of a finished ``trial``; ``repeats`` are done trials of the same config.

    ``baseline``: the study's baseline (tuner.trials.guard_check.baseline_trial),
    which the guard table judges the trial against.
    """
    results = _clean(dict(trial.results or {})) or {}
    results["objective"] = trial.objective
    if trial.objective_value is not None:
        results["objective_value"] = trial.objective_value
    if trial.startup_seconds is not None:
        results["startup_seconds"] = round(trial.startup_seconds, 3)
    if trial.backend_actual:
        results["attention_backend"] = trial.backend_actual
    telemetry = _clean(dict(trial.telemetry or {}))
    if telemetry:
        results["telemetry"] = telemetry
    noise = _noise(trial, repeats)
    if noise:
        results["noise"] = noise
        # The headline is the config's mean over its launches, never one (lucky) repeat;
        # the other figures are this trial's own, and it says so (issue 32).
        own = results.get("objective_value")
        results["objective_value"] = noise["mean"]
        if own is not None:
            results["trial_objective_value"] = own
        results["measured"] = (
            f"objective_value is the mean {trial.objective} of {noise['repeats']} launches of "
            f"this config (trials in [results.noise]); the other figures are trial "
            f"{trial.short_id}'s own"
        )
    ran = _ran(trial)
    if ran:
        results["ran"] = ran
    untuned = merge([shapes_of(t) for t in (trial, *repeats)])
    if untuned:
        # AITER's default kernels ran for these shapes: the figures are not a tuned table's
        # (issue 29; `tunelab export TRIAL --aiter-untuned` writes them for AITER's tuner).
        results["aiter_untuned"] = {"summary": untuned.summary(), **untuned.by_family()}
    guard = guard_table(guard_verdicts([trial], baseline)[0])
    if guard:
        results["guard"] = guard
    if trial.environment:
        # What `presets verify` compares this node with (tuner.environment).
        results["environment"] = _clean(dict(trial.environment))
    workload = _clean(trial.workload.to_dict()) or {}
    gpus = list(trial.gpu_names or [])
    target = PresetTarget(
        model=trial.config.model,
        vllm_version=trial.vllm_version,
        platform=trial.platform,
        gpu_name=gpus[0] if gpus else None,
        gpu_count=len(gpus) if gpus else (0 if trial.platform == "cpu" else None),
    )
    finished = trial.finished_at or trial.created_at
    return preset_from_config(
        trial.config,
        f"trial-{trial.short_id}",
        description=f"Exported from trial {trial.id} (study {trial.study!r}, objective {trial.objective}).",
        target=target,
        workload=workload,
        results=results,
        provenance=Provenance(
            trial_id=trial.id, notes=f"study {trial.study}; measured at {finished:.0f} (unix time)"
        ),
    )


def guard_table(g: TrialGuard) -> dict[str, Any] | None:
    """``[results.guard]``: the verdict against the baseline and its figures; None without a guard.

    Keys: verdict (same / close / drifted / unknown, or ``baseline`` for the
    reference itself), summary, probes, tokens (per probe), match_rate,
    first_divergence (earliest differing generated token, absent when none),
    mean_abs_dlogprob (nats), baseline_trial, seconds (the guard's cost).
    """
    run = guard_of(g.trial)
    if run is None:
        return None
    table: dict[str, Any] = {
        "probes": len(run.probes),
        "tokens": run.max_tokens,
        "seconds": round(run.seconds, 3),
    }
    if g.is_baseline:
        error = f"; its probes failed: {run.error}" if run.error else ""
        return {"verdict": "baseline", "summary": f"the study's baseline{error}", **table}
    v = g.verdict
    assert v is not None  # the trial has a guard run
    table.update(
        verdict=str(v.verdict),
        summary=v.summary(),
        match_rate=round(v.match_rate, 4),
        first_divergence=v.first_divergence,
        mean_abs_dlogprob=v.mean_abs_dlogprob,
        baseline_trial=g.baseline_id,
    )
    cleaned: dict[str, Any] = _clean(table)  # a dict stays a dict
    return cleaned


def _ran(trial: Trial) -> dict[str, Any]:
    """``[results.ran]``: each knob vLLM ran otherwise than the preset asks (its start-up log).

    The preset keeps the request (it is what the user chose, and another node or
    vLLM may honour it); this table, and a comment at the top of every exported
    file (:func:`tuner.export.preset.ran_notes`), say what this trial really ran.
    """
    effective = of_trial(trial.effective)
    if effective is None:
        return {}
    return {
        m.knob: {"requested": m.requested, "ran": m.effective, "vllm": effective.vllm_version}
        for m in effective.mismatches
    }


def _noise(trial: Trial, repeats: list[Trial]) -> dict[str, Any] | None:
    measured = [(t.id, metric(t, trial.objective)) for t in repeats]
    values = [(i, v) for i, v in measured if v is not None]
    noise = RepeatNoise.of([v for _, v in values])
    if noise is None:
        return None
    return noise.table(trial.objective, [i for i, _ in values])


def _clean(value: Any) -> Any:
    """``value`` without what TOML cannot hold (None, non-finite numbers) or a preset need not carry."""
    if isinstance(value, dict):
        out = {str(k): _clean(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None}
    if isinstance(value, list | tuple):
        if len(value) > _MAX_LIST:
            return None
        items = [_clean(v) for v in value]
        items = [v for v in items if v is not None]
        return items
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool):
        return value
    return None
