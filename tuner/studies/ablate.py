"""Winner ablation: which of the winner's changed knobs actually matter, and the shorter config.

A search or a sweep ends with a winner that changes several knobs from the
baseline; some of those changes carry the gain, others were along for the
ride (inside the noise, or even slightly harmful). Shipping them all costs
reviews and risk on every upgrade. For each knob the winner changes, a
leave-one-out A/B (:func:`tuner.studies.ab.run_ab`: repeated, interleaved full
launches, Welch's interval; on several GPUs the arms run side by side, and
``max_repeats`` makes it sequential) compares the winner without that knob
(arm A: the knob back at its baseline value, or left to vLLM when the
baseline does not set it) with the winner (arm B). B/A - 1 is then the
knob's own effect with its interval. A knob is kept only when the winner is
significantly better with it; a knob whose effect is inside the noise, or
that hurts, is dropped. Knobs interact, so the minimal config (the winner
with every dropped knob reverted) is then A/B'd against the winner once more
(the confirmation): if dropping them together costs a significant amount,
the report says so and the minimal config should not replace the winner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.errors import TunelabError
from tuner.studies.ab import ABReport, run_ab
from tuner.studies.common import study_name
from tuner.studies.stats import Verdict, format_relative

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig, EngineValue
    from tuner.studies.executor import TrialRunner
    from tuner.trials.model import Trial


class AblateError(TunelabError, ValueError):
    """An ablation that cannot run as asked; the fix says what to change."""


@dataclass(frozen=True)
class KnobChange:
    """One knob the winner sets differently from the baseline.

    Attributes:
        key: The knob (env variable or engine argument, as in the config).
        winner: The winner's value.
        baseline: The baseline's value (None: the baseline leaves it to vLLM).
    """

    key: str
    winner: EngineValue | None
    baseline: EngineValue | None


def changed_knobs(baseline: EngineConfig, winner: EngineConfig) -> list[KnobChange]:
    """The knobs (env and engine) whose value differs, sorted by key.

    Raises:
        AblateError: The configs serve different models (knobs cannot explain that).
    """
    if baseline.model != winner.model:
        raise AblateError(
            f"the winner serves {winner.model} and the baseline {baseline.model}",
            fix="ablate against a baseline of the same model (--baseline TRIAL)",
        )
    mine: dict[str, Any] = {**winner.env, **winner.engine}
    theirs: dict[str, Any] = {**baseline.env, **baseline.engine}
    return [
        KnobChange(key, mine.get(key), theirs.get(key))
        for key in sorted(set(mine) | set(theirs))
        if mine.get(key) != theirs.get(key)
    ]


def without(config: EngineConfig, changes: list[KnobChange]) -> EngineConfig:
    """``config`` with each change reverted to the baseline's value (removed when it had none)."""
    return config.with_values({c.key: c.baseline for c in changes})


@dataclass
class KnobEffect:
    """What one knob is worth to the winner.

    Attributes:
        change: The knob and its two values.
        report: The leave-one-out A/B (A: winner without the knob, B: the winner).
        kept: The winner is significantly better with it.
    """

    change: KnobChange
    report: ABReport
    kept: bool

    def describe(self) -> str:
        row = self.report.objective_row
        effect = format_relative(row) if row is not None else "not measured"
        why = "kept" if self.kept else "dropped"
        return f"{self.change.key}={self.change.winner}: {effect} ({self.report.verdict}; {why})"

    def to_table(self) -> dict[str, Any]:
        """``[results.ablation.<knob>]``: the knob's effect with its interval."""
        row = self.report.objective_row
        table: dict[str, Any] = {
            "value": self.change.winner,
            "baseline": "default" if self.change.baseline is None else self.change.baseline,
            "kept": self.kept,
            "verdict": str(self.report.verdict),
            "study": self.report.study,
        }
        if row is not None:
            table.update(
                effect=row.rel_diff,
                ci_low=row.rel_ci_low,
                ci_high=row.rel_ci_high,
                confidence_level=row.confidence,
                repeats=min(row.a.n, row.b.n),
            )
        return {k: v for k, v in table.items() if v is not None}


@dataclass
class AblationReport:
    """The outcome of ``tunelab ablate``.

    Attributes:
        winner_id: The ablated trial.
        baseline_id: The trial it was compared with.
        objective: The metric every A/B is about.
        effects: One leave-one-out A/B per changed knob.
        minimal: The winner with the dropped knobs reverted.
        confirmation: minimal (A) vs winner (B), when anything was dropped.
    """

    winner_id: str
    baseline_id: str
    objective: str
    effects: list[KnobEffect]
    minimal: EngineConfig
    confirmation: ABReport | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def kept(self) -> list[KnobEffect]:
        return [e for e in self.effects if e.kept]

    @property
    def dropped(self) -> list[KnobEffect]:
        return [e for e in self.effects if not e.kept]

    @property
    def confirmed(self) -> bool:
        """The minimal config is not significantly worse than the winner (or nothing was dropped)."""
        return self.confirmation is None or self.confirmation.verdict is not Verdict.B_BETTER

    def summary(self) -> str:
        kept = ", ".join(e.change.key for e in self.kept) or "none"
        dropped = ", ".join(e.change.key for e in self.dropped) or "none"
        text = f"{len(self.effects)} changed knob(s): kept {kept}; dropped {dropped}"
        if self.confirmation is not None:
            row = self.confirmation.objective_row
            effect = format_relative(row) if row is not None else "not measured"
            verdict = "holds" if self.confirmed else "does NOT hold: keep the winner"
            text += f"; winner vs minimal {effect}: the minimal config {verdict}"
        return text

    def ablation_tables(self) -> dict[str, Any]:
        return {e.change.key: e.to_table() for e in self.effects}

    def to_dict(self) -> dict[str, Any]:
        return {
            "winner": self.winner_id,
            "baseline": self.baseline_id,
            "objective": self.objective,
            "summary": self.summary(),
            "effects": self.ablation_tables(),
            "minimal": self.minimal.canonical(),
            "confirmation": self.confirmation.to_dict() if self.confirmation else None,
            "confirmed": self.confirmed,
            "notes": self.notes,
        }


async def run_ablation(
    winner: Trial,
    baseline: Trial,
    runner: TrialRunner,
    *,
    repeats: int = 3,
    max_repeats: int | None = None,
    confidence: float = 0.95,
    confirm: bool = True,
    study: str | None = None,
    workload: Workload | None = None,
    on_knob: Callable[[KnobEffect], None] | None = None,
) -> AblationReport:
    """Leave-one-out A/Bs for every knob ``winner`` changes from ``baseline``, then the confirmation.

    Raises:
        AblateError: Different models, or nothing changed.
    """
    changes = changed_knobs(baseline.config, winner.config)
    if not changes:
        raise AblateError(
            f"trial {winner.short_id} sets the same knobs as the baseline {baseline.short_id}",
            fix="ablate a trial that changes knobs from its study's baseline",
        )
    load = workload or winner.workload
    name = study or study_name("ablate")
    effects: list[KnobEffect] = []
    for change in changes:
        report = await run_ab(
            without(winner.config, [change]),
            winner.config,
            load,
            runner,
            repeats=repeats,
            max_repeats=max_repeats,
            study=f"{name}-{change.key}",
            objective=winner.objective,
            confidence=confidence,
        )
        effect = KnobEffect(change, report, kept=report.verdict is Verdict.B_BETTER)
        effects.append(effect)
        if on_knob is not None:
            on_knob(effect)
    dropped = [e.change for e in effects if not e.kept]
    minimal = without(winner.config, dropped)
    confirmation = None
    if confirm and dropped:
        confirmation = await run_ab(
            minimal,
            winner.config,
            load,
            runner,
            repeats=repeats,
            max_repeats=max_repeats,
            study=f"{name}-confirm",
            objective=winner.objective,
            confidence=confidence,
        )
    return AblationReport(winner.id, baseline.id, winner.objective, effects, minimal, confirmation)
