"""Honest A/B: two configs, repeated and interleaved, compared with their noise.

Each repeat of an arm is a full trial — engine start, warm-up, measured run,
engine stop — so the spread between repeats includes everything that changes
from one launch of a server to the next (memory layout, KV-cache sizing,
compilation, the machine's other load). Keeping both engines up and
alternating requests between them would be cheaper, but on a small machine
two engines share the cores and distort each other, and on a GPU node they
would share the GPU; sequential full launches are what production sees.

The arms are interleaved so that slow drift (thermals, other tenants, page
cache) hits both alike. The default order is counterbalanced — A B B A A B
B A ... — which cancels a linear drift exactly; plain alternation (A B A B,
``order="abab"``) leaves B always one slot later than A. Every trial is
stored under one study with its arm and repeat, and the report compares the
arms per metric with Welch's t interval over repeats, on the ratio B/A
(tuner.studies.stats).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tuner.bench.metrics import delivery_warning
from tuner.engine.effective import arms_differences
from tuner.studies.common import TrialRunner, study_name, value_of
from tuner.studies.stats import DEFAULT_METRICS, Comparison, Verdict, compare, format_relative

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.trials.model import Trial

Order = Literal["abba", "abab"]


class ABError(ValueError):
    """An A/B that cannot be run as asked; says what to change."""


def schedule(repeats: int, order: Order = "abba") -> list[tuple[str, int]]:
    """The run order as (arm, repeat) pairs.

    ``abba``: A B, B A, A B, ... (pairs alternate their order; cancels linear drift).
    ``abab``: A B, A B, ...
    """
    if repeats < 1:
        raise ABError(f"repeats must be >= 1 (2 or more to estimate noise), got {repeats}")
    if order not in ("abba", "abab"):
        raise ABError(f"order must be 'abba' or 'abab', got {order!r}")
    out: list[tuple[str, int]] = []
    for r in range(repeats):
        pair = ("B", "A") if order == "abba" and r % 2 else ("A", "B")
        out.extend((arm, r) for arm in pair)
    return out


@dataclass
class ABReport:
    """The outcome of an A/B.

    Attributes:
        study: Study name the trials are stored under.
        objective: The metric the overall verdict is about.
        verdict: The objective's verdict.
        rows: One comparison per metric (objective first).
        trials: Trial ids per arm, in run order.
        failures: ``arm/repeat: reason`` for every trial that did not finish.
        a_config, b_config: The two configs (canonical form).
        notes: ``arm/repeat: ...`` for every trial whose responses mostly
            arrived in one piece, so its TTFT/TPOT/ITL rows read as what they are.
    """

    study: str
    objective: str
    verdict: Verdict
    rows: list[Comparison]
    trials: dict[str, list[str]]
    failures: list[str] = field(default_factory=list)
    a_config: dict[str, Any] = field(default_factory=dict)
    b_config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def objective_row(self) -> Comparison | None:
        return next((r for r in self.rows if r.metric == self.objective), None)

    def summary(self) -> str:
        """One sentence: the verdict on the objective with its interval."""
        row = self.objective_row
        if row is None:
            return f"{self.verdict}: no finished trials measured {self.objective}"
        return (
            f"{self.verdict} on {self.objective}: B vs A {format_relative(row)} "
            f"({row.confidence:.0%} interval; A n={row.a.n}, B n={row.b.n}; {row.reason})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "objective": self.objective,
            "verdict": self.verdict.value,
            "summary": self.summary(),
            "metrics": [r.to_dict() for r in self.rows],
            "trials": self.trials,
            "failures": self.failures,
            "a_config": self.a_config,
            "b_config": self.b_config,
            "notes": self.notes,
        }


def build_report(
    trials: Sequence[Trial],
    *,
    study: str,
    objective: str,
    metrics: Sequence[str] = DEFAULT_METRICS,
    confidence: float = 0.95,
    min_rel_effect: float = 0.0,
) -> ABReport:
    """Compare the A and B trials of a study (pure: works on stored trials too).

    Metrics that no finished trial of an arm reports are left out; a failed
    repeat is listed in ``failures`` and simply contributes no sample.
    """
    arms: dict[str, list[Trial]] = {"A": [], "B": []}
    for t in trials:
        if t.arm in arms:
            arms[t.arm].append(t)
    failures = [
        f"{t.arm}/{t.repeat}: {t.status} ({t.failure_reason or 'no reason recorded'})"
        for t in trials
        if t.arm in arms and value_of(t, objective) is None
    ]
    notes = [
        f"{t.arm}/{t.repeat}: {warning}"
        for t in trials
        if t.arm in arms and (warning := delivery_warning(t.results or {}, short=True))
    ]
    # What vLLM really ran in each arm, not only what was asked (issue 14).
    notes.extend(f"ran: {d.note()}" for d in arms_differences(arms["A"], arms["B"]))
    names = [objective, *[m for m in metrics if m != objective]]
    rows: list[Comparison] = []
    for name in names:
        a = [v for t in arms["A"] if (v := value_of(t, name)) is not None]
        b = [v for t in arms["B"] if (v := value_of(t, name)) is not None]
        if not a or not b:
            continue
        rows.append(compare(name, a, b, confidence=confidence, min_rel_effect=min_rel_effect))
    verdict = next((r.verdict for r in rows if r.metric == objective), Verdict.NO_DIFFERENCE)
    first_a = arms["A"][0].config.canonical() if arms["A"] else {}
    first_b = arms["B"][0].config.canonical() if arms["B"] else {}
    return ABReport(
        study=study,
        objective=objective,
        verdict=verdict,
        rows=rows,
        trials={arm: [t.id for t in ts] for arm, ts in arms.items()},
        failures=failures,
        a_config=first_a,
        b_config=first_b,
        notes=notes,
    )


async def run_ab(
    a: EngineConfig,
    b: EngineConfig,
    workload: Workload,
    runner: TrialRunner,
    *,
    repeats: int = 3,
    order: Order = "abba",
    study: str | None = None,
    objective: str = "output_throughput",
    metrics: Sequence[str] = DEFAULT_METRICS,
    confidence: float = 0.95,
    min_rel_effect: float = 0.0,
    on_trial: Callable[[Trial], None] | None = None,
) -> ABReport:
    """Run an A/B of ``a`` against ``b`` and compare them.

    Args:
        a: Config of arm A (the baseline).
        b: Config of arm B (the candidate).
        workload: The same workload for every trial.
        runner: Runs each trial (store, events and run options).
        repeats: Trials per arm (>= 2 for a verdict; 3–5 is typical).
        order: ``abba`` (counterbalanced, default) or ``abab``.
        study: Study name (default ``ab-<time>``).
        objective: The metric of the overall verdict.
        metrics: The other metrics to compare.
        confidence: Two-sided confidence level of the intervals.
        min_rel_effect: Smallest relative difference that counts as a win.
        on_trial: Called with each trial once it reached a final state.

    Raises:
        ABError: A bad repeat count or order, or arms on different models.
    """
    from tuner.trials.model import Trial

    if a.model != b.model:
        raise ABError(
            f"arms A and B serve different models ({a.model} vs {b.model}); an A/B compares "
            "knobs on one model — use two studies to compare models"
        )
    plan = schedule(repeats, order)
    name = study or study_name("ab")
    done: list[Trial] = []
    for arm, rep in plan:
        trial = Trial(
            config=a if arm == "A" else b,
            workload=workload,
            study=name,
            objective=objective,
            arm=arm,
            repeat=rep,
            tags={"kind": "ab", "order": order, "repeats": repeats},
        )
        finished = await runner.one(trial)
        done.append(finished)
        if on_trial is not None:
            on_trial(finished)
    return build_report(
        done,
        study=name,
        objective=objective,
        metrics=metrics,
        confidence=confidence,
        min_rel_effect=min_rel_effect,
    )
