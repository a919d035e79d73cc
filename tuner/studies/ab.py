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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from tuner.bench.host_noise import host_note
from tuner.bench.metrics import delivery_warning, is_chunk_metric
from tuner.bench.window import repeats_note
from tuner.engine.aiter_shapes import arms_note
from tuner.engine.effective import arms_differences
from tuner.environment import arm_notes
from tuner.errors import TunelabError
from tuner.profiles.record import ARMED, CAPTURE, PROFILE_TAG
from tuner.studies.ab_explain import ArmsExplanation, arms_explanation
from tuner.studies.ab_judgement import TAG as JUDGEMENT_TAG
from tuner.studies.ab_judgement import Judgement, applied_judgement
from tuner.studies.ab_notes import gpu_effects, sample_notes
from tuner.studies.common import study_name, value_of
from tuner.studies.sequential import (
    Decision,
    Look,
    SequentialDesign,
    SequentialError,
    SequentialMonitor,
    Spending,
    comparison_at,
)
from tuner.studies.stats import DEFAULT_METRICS, Comparison, Verdict, compare, format_relative
from tuner.trials.model import Trial
from tuner.trials.slots import world_size

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.studies.executor import TrialRunner

Order = Literal["abba", "abab"]


class ABError(TunelabError, ValueError):
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
            arrived in one piece, so its TTFT/TPOT/ITL rows read as what they are;
            and per-GPU effects when arms ran on several GPUs.
        looks: The sequential analyses (empty for a fixed-size A/B); the
            objective row is the last look's repeated confidence interval.
        stopped: Why a sequential A/B ended (None for a fixed-size one).
        confidence: The level its intervals were judged at (the stored judgement's:
            tuner.studies.ab_judgement); a sequential objective row states its own.
        explanation: Why B is faster, by kernel family, from each arm's profile
            (tuner.studies.ab_explain); None when no trial was profiled.
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
    looks: list[Look] = field(default_factory=list)
    stopped: Decision | None = None
    confidence: float = 0.95
    explanation: ArmsExplanation | None = None

    @property
    def objective_row(self) -> Comparison | None:
        return next((r for r in self.rows if r.metric == self.objective), None)

    def summary(self) -> str:
        """One sentence: the verdict on the objective with its interval."""
        row = self.objective_row
        if row is None:
            return f"{self.verdict}: no finished trials measured {self.objective}"
        if row.withheld:
            return (
                f"no verdict on {self.objective}: {row.withheld}, so it measured a starved "
                f"server, not streaming (B vs A {format_relative(row)}; A n={row.a.n}, "
                f"B n={row.b.n})"
            )
        text = (
            f"{self.verdict} on {self.objective}: B vs A {format_relative(row)} "
            f"({row.confidence:.1%} interval; A n={row.a.n}, B n={row.b.n}; {row.reason})"
        )
        if self.stopped is not None:
            text += f"; sequential: stopped after {len(self.looks)} look(s), {self.stopped}"
        return text

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
            "looks": [look.to_dict() for look in self.looks],
            "confidence": self.confidence,
            "stopped": self.stopped.value if self.stopped is not None else None,
            "explanation": self.explanation.to_dict() if self.explanation else None,
        }


def build_report(
    trials: Sequence[Trial],
    *,
    study: str,
    objective: str,
    metrics: Sequence[str] | None = None,
    confidence: float | None = None,
    min_rel_effect: float | None = None,
) -> ABReport:
    """Compare the A and B trials of a study (pure: works on stored trials too).

    Metrics that no finished trial of an arm reports are left out; a failed
    repeat is listed in ``failures`` and simply contributes no sample. A
    sequential A/B (its trials tagged with the design) is replayed look by
    look, wave by wave, and every A/B is judged as its run judged it (its
    confidence, smallest win and metrics are stored with its trials:
    tuner.studies.ab_judgement), so a stored study gives the verdict its run gave.

    Args:
        trials: The trials, their ``arm`` set to "A" or "B".
        study: The study's name.
        objective: The metric of the overall verdict.
        metrics, confidence, min_rel_effect: Judge differently from the stored
            judgement (a note says so); None: as stored (else the defaults).
    """
    arms: dict[str, list[Trial]] = {x: [t for t in trials if t.arm == x] for x in "AB"}
    failures = [
        f"{t.arm_label}: {t.status} ({t.failure_reason or 'no reason recorded'})"
        for t in trials
        if t.arm in arms and value_of(t, objective) is None
    ]
    notes = _notes(trials, arms, objective)
    judged = applied_judgement(arms["A"] + arms["B"], metrics, confidence, min_rel_effect, notes)
    confidence, min_rel_effect = judged.confidence, judged.min_rel_effect
    names = [objective, *[m for m in judged.metrics if m != objective]]
    starved = [
        arm for arm, ts in arms.items() if any(delivery_warning(t.results or {}) for t in ts)
    ]
    rows: list[Comparison] = []
    for name in names:
        a = [v for t in arms["A"] if (v := value_of(t, name)) is not None]
        b = [v for t in arms["B"] if (v := value_of(t, name)) is not None]
        if not a or not b:
            continue
        rows.append(compare(name, a, b, confidence=confidence, min_rel_effect=min_rel_effect))
    looks = replay_looks(arms["A"] + arms["B"], objective)
    if looks and looks[-1].comparison is not None:
        final = _at_least(looks[-1], design_of(arms["A"] + arms["B"]), min_rel_effect)
        rows = [final, *[r for r in rows if r.metric != objective]]
    if starved:  # an arm's TPOT/ITL measured starvation, not streaming: no verdict from them
        rows = [
            replace(r, one_piece=tuple(starved)) if is_chunk_metric(r.metric) else r for r in rows
        ]
    verdict = next(
        (r.verdict for r in rows if r.metric == objective and not r.withheld),
        Verdict.NO_DIFFERENCE,  # nothing measured it, or its figures were withheld: no winner
    )
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
        looks=looks,
        stopped=looks[-1].decision if looks else None,
        confidence=confidence,
        explanation=arms_explanation(arms),
    )


def _at_least(last: Look, design: SequentialDesign | None, min_rel_effect: float) -> Comparison:
    """The last look's comparison, judged against the smallest win as a fixed A/B is.

    The sequential design stops on "the repeated interval excludes no change";
    whether that difference is big enough to count is the judgement's rule,
    the same for both designs.
    """
    row = last.comparison
    assert row is not None
    if min_rel_effect <= 0 or row.verdict is Verdict.NO_DIFFERENCE:
        return row
    pooled = design.pooled if design is not None else False
    return comparison_at(
        row.metric,
        row.a.samples,
        row.b.samples,
        last.level,
        pooled=pooled,
        min_rel_effect=min_rel_effect,
    )


def _notes(trials: Sequence[Trial], arms: dict[str, list[Trial]], objective: str) -> list[str]:
    """What the reader must know beside the figures: starved or contaminated repeats, too few
    samples, an unusable stored design, GPU and environment differences, what vLLM ran."""
    notes = [
        f"{t.arm_label}: {warning}"
        for t in trials
        if t.arm in arms and (warning := delivery_warning(t.results or {}, short=True))
    ]
    # A repeat measured while others took the CPU (issue 17: contamination).
    notes.extend(
        f"{t.arm_label}: host: {note}"
        for t in trials
        if t.arm in arms and (note := host_note(t.results or {}))
    )
    notes.extend(sample_notes(arms))
    # Short windows whose repeats spread: the size that would steady them (issue 32).
    notes.extend(
        f"{arm}: {window.describe()}"
        for arm, ts in arms.items()
        if (window := repeats_note([t.results for t in ts if value_of(t, objective) is not None]))
    )
    unusable_design = stored_design(arms["A"] + arms["B"])[1]
    if unusable_design:
        notes.append(unusable_design)
    notes.extend(gpu_effects(arms["A"] + arms["B"], objective))
    # What each arm ran on (issue 17): an upgrade or a power cap between arms is named.
    notes.extend(arm_notes({arm: [t.environment for t in ts] for arm, ts in arms.items()}))
    # What vLLM really ran in each arm, not only what was asked (issue 14).
    notes.extend(f"ran: {d.note()}" for d in arms_differences(arms["A"], arms["B"]))
    # Kernel shapes AITER ran on its default kernels, per arm (issue 29).
    untuned = arms_note([t.untuned for t in arms["A"]], [t.untuned for t in arms["B"]])
    return [*notes, untuned] if untuned else notes


def design_of(trials: Sequence[Trial]) -> SequentialDesign | None:
    """The sequential design the trials were run under (from their tags), None for a fixed A/B."""
    return stored_design(trials)[0]


def stored_design(trials: Sequence[Trial]) -> tuple[SequentialDesign | None, str | None]:
    """The stored sequential design, and why it is ignored when a tag holds an unusable one.

    A store is foreign data: a design whose spending, alpha or repeats make no
    sense (hand-edited, hostile) must not end the report; the A/B is then
    judged as a fixed design and the note says so.
    """
    for t in trials:
        raw = t.tags.get("sequential")
        if isinstance(raw, dict):
            try:
                return SequentialDesign(
                    max_repeats=int(raw["max_repeats"]),
                    alpha=float(raw["alpha"]),
                    spending=Spending(raw["spending"]),
                    equivalence=raw.get("equivalence"),
                    pooled=bool(raw.get("pooled", False)),  # absent in A/Bs stored before it
                ), None
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                why = " ".join(str(exc).split())[:160]
                return None, (
                    f"the sequential design stored with trial {t.short_id} cannot be used "
                    f"({why}): judged as a fixed A/B"
                )
    return None, None


def replay_looks(trials: Sequence[Trial], objective: str) -> list[Look]:
    """The looks of a sequential A/B, one after each wave, as the run made them."""
    design = design_of(trials)
    if design is None:
        return []
    monitor = SequentialMonitor(design)
    waves = sorted({int(t.tags.get("wave", t.repeat or 0)) for t in trials})
    for wave in waves:
        upto = [t for t in trials if int(t.tags.get("wave", t.repeat or 0)) <= wave]
        a = [v for t in upto if t.arm == "A" and (v := value_of(t, objective)) is not None]
        b = [v for t in upto if t.arm == "B" and (v := value_of(t, objective)) is not None]
        if monitor.look(objective, a, b).decision is not Decision.CONTINUE:
            break
    if monitor.looks and not monitor.decided:
        # Ended early without a decision (failures, interruption): say so.
        final = monitor.looks[-1]
        monitor.looks[-1] = Look(
            final.n_a, final.n_b, final.level, Decision.EXHAUSTED, final.comparison
        )
    return monitor.looks


def _waves(total: int, pairs: int, order: Order) -> list[list[tuple[str, int]]]:
    """(arm, repeat) per wave: one round per wave on one slot (ABBA), ``pairs`` rounds side by side on more."""
    if pairs <= 1:
        return [
            [(arm, rep) for arm, rep in schedule(total, order) if rep == r] for r in range(total)
        ]
    return [
        [(arm, r) for r in range(start, min(total, start + pairs)) for arm in ("A", "B")]
        for start in range(0, total, pairs)
    ]


def _placement(
    wave: int, plan: list[tuple[str, int]], slots: list[tuple[str, ...]]
) -> list[tuple[str, ...] | None]:
    """Exact GPUs per trial of a parallel wave: pair i on slots 2i and 2i+1, A and B swapping each wave."""
    if len(slots) < 2:
        return [None] * len(plan)
    out: list[tuple[str, ...] | None] = []
    for index, (arm, _) in enumerate(plan):
        pair = index // 2
        a_first = (wave + pair) % 2 == 0
        first = (arm == "A") == a_first
        out.append(slots[2 * pair] if first else slots[2 * pair + 1])
    return out


def _design(
    max_repeats: int | None,
    equivalence: float | None,
    confidence: float,
    spending: Spending,
    pooled: bool = False,
) -> SequentialDesign | None:
    """The sequential design asked for (None: a fixed-size A/B)."""
    if max_repeats is None and equivalence is None:
        return None
    try:
        return SequentialDesign(
            max_repeats or 6, 1.0 - confidence, spending, equivalence, pooled=pooled
        )
    except SequentialError as exc:
        raise ABError(str(exc)) from None


def _tags(
    design: SequentialDesign | None, order: str, total: int, judgement: Judgement
) -> dict[str, Any]:
    """What every trial of the A/B carries, enough to replay its looks and verdict from the store."""
    tags: dict[str, Any] = {"kind": "ab", "order": order, "repeats": total}
    tags[JUDGEMENT_TAG] = judgement.to_tag()
    if design is not None:
        tags["sequential"] = {
            "max_repeats": design.max_repeats,
            "alpha": design.alpha,
            "spending": design.spending.value,
            "equivalence": design.equivalence,
            "pooled": design.pooled,
        }
    return tags


@dataclass(frozen=True)
class _ArmTrials:
    """Builds a wave's trials: each (arm, repeat) of the plan as a trial of the study."""

    a: EngineConfig
    b: EngineConfig
    workload: Workload
    study: str
    objective: str
    tags: dict[str, Any]
    profile: bool = False

    def __call__(self, wave: int, plan: list[tuple[str, int]]) -> list[Trial]:
        return [
            Trial(
                config=self.a if arm == "A" else self.b,
                workload=self.workload,
                study=self.study,
                objective=self.objective,
                arm=arm,
                repeat=rep,
                tags={**self.tags, "wave": wave, **self._profile(rep)},
            )
            for arm, rep in plan
        ]

    def _profile(self, repeat: int) -> dict[str, str]:
        """Each arm's first launch takes the profile; the others run the same command line."""
        if not self.profile:
            return {}
        return {PROFILE_TAG: CAPTURE if repeat == 0 else ARMED}


async def _run_waves(
    waves: list[list[tuple[str, int]]],
    make: Callable[[int, list[tuple[str, int]]], list[Trial]],
    slots: list[tuple[str, ...]],
    runner: TrialRunner,
    monitor: SequentialMonitor | None,
    objective: str,
    on_trial: Callable[[Trial], None] | None,
) -> list[Trial]:
    """Run the A/B wave by wave; a sequential monitor looks after each and may stop it.

    Returns the trials run, in wave order.
    """
    done: list[Trial] = []
    progress = runner.progress
    for wave, plan in enumerate(waves):
        progress.wave(wave, note=f"wave {wave + 1}: {len(plan)} launch(es)")
        finished = await runner.all(make(wave, plan), _placement(wave, plan, slots), on_trial)
        done.extend(finished)
        if monitor is None:
            continue
        a_values = [v for t in done if t.arm == "A" and (v := value_of(t, objective))]
        b_values = [v for t in done if t.arm == "B" and (v := value_of(t, objective))]
        look = monitor.look(objective, a_values, b_values)
        progress.say(f"look {len(monitor.looks)} after wave {wave + 1}: {look.decision}")
        if look.decision is not Decision.CONTINUE:
            break
    return done


def _check_arms(a: EngineConfig, b: EngineConfig, repeats: int, order: Order) -> None:
    """Raises ABError for arms on different models, a bad repeat count or order."""
    if a.model != b.model:
        raise ABError(
            f"arms A and B serve different models ({a.model} vs {b.model}); an A/B compares "
            "knobs on one model — use two studies to compare models"
        )
    schedule(repeats, order)  # validates repeats and order


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
    max_repeats: int | None = None,
    equivalence: float | None = None,
    spending: Spending = Spending.POCOCK,
    on_trial: Callable[[Trial], None] | None = None,
    pooled: bool = False,
    profile: bool = False,
) -> ABReport:
    """Run an A/B of ``a`` against ``b`` and compare them.

    With one GPU slot (or none) the arms alternate in ``order``, one round
    (one launch per arm) at a time. With two slots or more, A and B run at
    the same time, as many pairs per wave as the slots hold, and the GPU each
    arm gets swaps from wave to wave so GPU-to-GPU differences cancel.
    With ``max_repeats`` (or ``equivalence``) the A/B is sequential
    (tuner.studies.sequential): after every wave it stops once the repeated
    interval excludes no change, or lies inside +-``equivalence``.

    Args:
        a: Config of arm A (the baseline).
        b: Config of arm B (the candidate).
        workload: The same workload for every trial.
        runner: Runs each trial (store, events, run options, GPU slots).
        repeats: Trials per arm of a fixed-size A/B (>= 2 for a verdict).
        order: ``abba`` (counterbalanced, default) or ``abab`` (one slot).
        study: Study name (default ``ab-<time>``).
        objective: The metric of the overall verdict.
        metrics: The other metrics to compare.
        confidence: Two-sided confidence level of the intervals (sequential:
            over all looks together).
        min_rel_effect: Smallest relative difference that counts as a win
            (sequential too: a stop for a smaller difference is no win).
        max_repeats: Sequential stopping: launches per arm at most.
        equivalence: Sequential stopping: stop as "no difference" inside
            +- this fraction (max_repeats defaults to 6 when only this is given).
        spending: The alpha-spending function of the sequential design.
        on_trial: Called with each trial once it reached a final state.
        pooled: Sequential looks on Student's pooled interval (see
            :class:`~tuner.studies.sequential.SequentialDesign`).
        profile: Profile each arm's first launch after its measured run (no extra
            launch; tuner.profiles.capture) and explain the difference by family.

    Raises:
        ABError: A bad repeat count, order or design, or arms on different models.
    """
    _check_arms(a, b, repeats, order)
    design = _design(max_repeats, equivalence, confidence, spending, pooled)
    total = design.max_repeats if design else repeats
    name = study or study_name("ab")
    size = max(world_size(Trial(a, workload)), world_size(Trial(b, workload)))
    slots = [slot.devices for slot in runner.pool.slots(size)]
    waves = _waves(total, len(slots) // 2, order)
    judgement = Judgement(confidence, min_rel_effect, tuple(metrics))
    tags = _tags(design, order if len(slots) < 2 else "parallel-swap", total, judgement)
    runner.begin(name, "ab", 2 * total, waves=len(waves))
    make = _ArmTrials(a, b, workload, name, objective, tags, profile)
    monitor = SequentialMonitor(design) if design else None
    done = await _run_waves(waves, make, slots, runner, monitor, objective, on_trial)
    return build_report(
        done,
        study=name,
        objective=objective,
        metrics=metrics,
        confidence=confidence,
        min_rel_effect=min_rel_effect,
    )
