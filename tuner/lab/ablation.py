"""The minimal preset an ablation leaves: the shorter config with each knob's measured effect.

``tunelab ablate`` prints or writes it; the preset's content is a decision
(which figure is the minimal config's own, which noise goes with it), so it
is made here, once, from the core's :class:`~tuner.studies.ablate.AblationReport`.
"""

from __future__ import annotations

from typing import Any

from tuner.export.preset import Preset, PresetTarget, Provenance, preset_from_config
from tuner.studies.ablate import AblationReport
from tuner.trials.model import Trial
from tuner.trials.noise import RepeatNoise


def minimal_preset(report: AblationReport, winner: Trial) -> Preset:
    """The minimal config as a preset carrying each knob's effect and its own measured figure."""
    results: dict[str, Any] = {"objective": report.objective}
    source = report.confirmation or (report.effects[0].report if report.effects else None)
    row = source.objective_row if source is not None else None
    if row is not None:
        # The minimal config's own repeats: arm A of the confirmation, else (nothing
        # dropped: minimal == winner) arm B of a leave-one-out A/B.
        arm = row.a if report.confirmation is not None else row.b
        results["objective_value"] = arm.mean
        noise = RepeatNoise.of(arm.samples)
        if noise is not None:
            results["noise"] = noise.table(report.objective)
    results["ablation"] = report.ablation_tables()
    gpus = list(winner.gpu_names or [])
    return preset_from_config(
        report.minimal,
        f"minimal-{winner.short_id}",
        description=f"Trial {winner.id} without the knobs whose effect was inside the noise. "
        + report.summary(),
        target=PresetTarget(
            model=winner.config.model,
            vllm_version=winner.vllm_version,
            platform=winner.platform,
            gpu_name=gpus[0] if gpus else None,
            gpu_count=len(gpus) if gpus else None,
        ),
        workload={k: v for k, v in winner.workload.to_dict().items() if v is not None},
        results=results,
        provenance=Provenance(trial_id=winner.id, notes=f"tunelab ablate {winner.id}"),
    )
