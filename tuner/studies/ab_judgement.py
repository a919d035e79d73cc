"""How an A/B's figures become its verdict, stored with the A/B so every replay judges alike.

An A/B is judged at a confidence level, with a smallest effect that counts as a
win, on a list of metrics. The run used them; a replay (``ab --report``, the
TUI's compare view, the report, the export's choice of trial) rebuilds the
verdict from the stored trials, so it must use the same ones — otherwise
``ab --min-effect 0.05`` says "no significant difference" and every replay
"B better" (issue 28). The judgement travels as one tag on every trial of the
A/B (beside the sequential design, tuner.studies.ab), and a replay reads it
back here. A store is foreign data: a judgement that makes no sense is named
in a note and the defaults are used, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.studies.stats import DEFAULT_METRICS
from tuner.trials.model import Trial

TAG = "judgement"
# The bounds `tunelab ab` itself accepts (--confidence 0.5..0.999, --min-effect >= 0).
_CONFIDENCE = (0.5, 0.999)
_MAX_MIN_EFFECT = 100.0
_MAX_METRICS = 64


@dataclass(frozen=True)
class Judgement:
    """The rule that turns an A/B's samples into verdicts.

    Attributes:
        confidence: Two-sided level of every interval (sequential: the design's
            overall level; its looks spend it).
        min_rel_effect: Smallest relative difference that counts as a win
            (0.05 = 5 %); a real difference below it is "no significant difference".
        metrics: The metrics compared beside the objective.
    """

    confidence: float = 0.95
    min_rel_effect: float = 0.0
    metrics: tuple[str, ...] = DEFAULT_METRICS

    def to_tag(self) -> dict[str, Any]:
        """The form stored in each trial's tags."""
        return {
            "confidence": self.confidence,
            "min_rel_effect": self.min_rel_effect,
            "metrics": list(self.metrics),
        }

    def describe(self) -> str:
        """``95% intervals, a win from +5.0%`` (for notes)."""
        text = f"{self.confidence:.0%} intervals"
        if self.min_rel_effect > 0:
            text += f", a win from {self.min_rel_effect:.1%}"
        return text


def judgement_from_tag(raw: object) -> Judgement:
    """The judgement a stored tag holds.

    Raises:
        ValueError: The tag is not a judgement tunelab could have written.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"not a table but {type(raw).__name__}")
    confidence = float(raw["confidence"])
    low, high = _CONFIDENCE
    if not low <= confidence <= high:
        raise ValueError(f"confidence {confidence!r} is outside {low}..{high}")
    effect = float(raw.get("min_rel_effect", 0.0))
    if not (math.isfinite(effect) and 0.0 <= effect <= _MAX_MIN_EFFECT):
        raise ValueError(f"min_rel_effect {effect!r} is not a fraction >= 0")
    metrics = raw.get("metrics", list(DEFAULT_METRICS))
    if (
        not isinstance(metrics, list)
        or not 0 < len(metrics) <= _MAX_METRICS
        or not all(isinstance(m, str) and m.isidentifier() for m in metrics)
    ):
        raise ValueError("metrics is not a list of metric names")
    return Judgement(confidence, effect, tuple(metrics))


def stored_judgement(trials: Sequence[Trial]) -> tuple[Judgement | None, str | None]:
    """The judgement stored with an A/B's trials, and a note when it cannot be used.

    Returns ``(None, None)`` for trials that carry no A/B tags at all (a pooled
    comparison of single runs); ``(None, note)`` for an A/B stored before its
    judgement was kept, or with one that makes no sense.
    """
    tagged = [t for t in trials if t.tags.get("kind") == "ab" or TAG in t.tags]
    for t in tagged:
        if TAG not in t.tags:
            continue
        try:
            return judgement_from_tag(t.tags[TAG]), None
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            why = " ".join(str(exc).split())[:160]
            return None, (
                f"the judgement stored with trial {t.short_id} cannot be used ({why}): "
                f"judged with {Judgement().describe()}"
            )
    if tagged:
        return None, (
            "this A/B was stored before tunelab kept how it was judged: replayed with "
            f"{Judgement().describe()}, which may not be what its run used"
        )
    return None, None


def applied_judgement(
    trials: Sequence[Trial],
    metrics: Sequence[str] | None,
    confidence: float | None,
    min_rel_effect: float | None,
    notes: list[str],
) -> Judgement:
    """The judgement a report applies: the stored one, with what the caller overrides.

    Notes go to ``notes``: an old or unusable stored judgement, and a re-judgement
    that differs from the one the A/B ran with.
    """
    stored, why = stored_judgement(trials)
    if why:
        notes.append(why)
    base = stored or Judgement()
    asked = Judgement(
        base.confidence if confidence is None else confidence,
        base.min_rel_effect if min_rel_effect is None else min_rel_effect,
        base.metrics if metrics is None else tuple(metrics),
    )
    if stored is not None and asked.describe() != stored.describe():
        notes.append(f"re-judged with {asked.describe()}; the A/B ran with {stored.describe()}")
    return asked
