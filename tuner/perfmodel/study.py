"""The model of one study's trials, and how well it predicts the trials it was not fitted on.

A study mixes trials; only those of one context (same model, env, other engine arguments,
workload shape) share step costs. The largest such group calibrates the study's model; the
others are counted, not used. Its honesty is shown the only way a model can be checked:
every trial of the group is predicted from the others (leave one out) and compared with
what was measured.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.perfmodel.fit import Accuracy, Prediction, StepModel, calibrate, held_out
from tuner.perfmodel.forecast import MIN_TRIALS  # three unknown step costs
from tuner.perfmodel.observation import MODELLED_ENGINE_KEYS, Observation, observation_of_trial

__all__ = ["MIN_TRIALS", "StudyModel", "study_model"]


@dataclass(frozen=True)
class StudyModel:
    """A study's model, the trials behind it, and its leave-one-out score.

    Attributes:
        model: The calibrated model (None: too few usable trials; ``reason`` says why).
        observations: The trials it was fitted on.
        unusable: Trials with no usable figures or a workload the waves do not describe.
        other_context: Usable trials of other contexts (another model, env, backend ...).
        held_out: Each observation predicted by a model fitted on the others.
        reason: Why there is no model, for the faces to print.
    """

    model: StepModel | None
    observations: list[Observation]
    unusable: int
    other_context: int
    held_out: Accuracy | None
    reason: str = ""

    def predict(self, changes: Mapping[str, Any]) -> Prediction:
        """The latest trial's point with ``changes`` (Point field -> value) applied.

        Raises:
            ValueError: No model, or a change the model does not know.
        """
        if self.model is None:
            raise ValueError(self.reason)
        fields = {f.name for f in dataclasses.fields(self.observations[-1].point)}
        unknown = sorted(set(changes) - fields)
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)}: unknown until run — the model knows "
                f"{', '.join(sorted(MODELLED_ENGINE_KEYS))}, concurrency and the lengths"
            )
        point = dataclasses.replace(self.observations[-1].point, **changes)
        return self.model.predict(point)


def study_model(trials: Iterable[Any]) -> StudyModel:
    """The model of the largest group of a study's trials that share a context."""
    found: list[Observation] = []
    unusable = 0
    for trial in trials:
        obs = observation_of_trial(trial)
        if obs is None:
            unusable += 1
        else:
            found.append(obs)
    if not found:
        return StudyModel(None, [], unusable, 0, None, "no finished trial with a wave workload")
    context, _ = Counter(o.context for o in found).most_common(1)[0]
    group = [o for o in found if o.context == context]
    other = len(found) - len(group)
    if len(group) < MIN_TRIALS:
        return StudyModel(None, group, unusable, other, None,
                          f"{len(group)} comparable trial(s); the model needs {MIN_TRIALS}")  # fmt: skip
    scored = held_out(group) if len(group) > MIN_TRIALS else None
    return StudyModel(calibrate(group), group, unusable, other, scored)
