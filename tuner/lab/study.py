"""Study queries: a study's trials, its baseline, the A/B verdict, the pick to compare, the winner.

Every face asks these questions of the same functions, so the Run panel, the
compare view, the export dialog and ``tunelab ab --json`` cannot disagree:

- **The verdict** of two configs is :func:`tuner.studies.ab.build_report` and
  nothing else. When the study holds an A/B of exactly those two configs, that
  A/B's report is the verdict (its 3 vs 3 repeats, not re-pooled). Otherwise the
  finished trials of each config are pooled into arms and the same function
  judges them; the result says it pooled, and which trials it used.
- **The baseline** is the trial the user marked, kept per study in the store so it
  survives a restart; never marked, it is the study's first finished trial, and
  :attr:`Baseline.how` says which of the two it is.
- **The pick to compare** is never the baseline's own config.
- **The trial to export** after an A/B is the arm the A/B prefers: B only when it is
  significantly better, else the baseline A (no evidence to change); without an A/B,
  :func:`tuner.studies.winner.pick_winner` decides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner import bounded
from tuner.config import EngineValue
from tuner.export.aiter_untuned import untuned_bundle
from tuner.export.render import export
from tuner.export.trial import preset_from_trial
from tuner.studies.ab import ABReport, build_report
from tuner.studies.capacity_steps import CapacityStep, capacity_steps, configs_only
from tuner.studies.common import point_key, representative
from tuner.studies.space import Constraint
from tuner.studies.stats import Direction, Verdict, metric_direction
from tuner.studies.winner import WinnerError, WinnerReport, pick_winner
from tuner.trials.guard_check import (
    BASELINE_KEY,
    ArmsGuard,
    GuardFilter,
    GuardRequirement,
    TrialGuard,
    ab_guard,
    choose_baseline,
    guard_verdicts,
    require_guard,
)
from tuner.trials.model import Trial
from tuner.trials.store import StoreError, TrialNotFound, TrialStore

if TYPE_CHECKING:
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.perfmodel.forecast import Forecast
    from tuner.rules.types import Target

BASELINE_HOW_KEY = "baseline-how"
LAST_AB_KEY = "last-ab"
SHOWN_JOB_KEY = "tui-job-shown"
OBJECTIVE = "output_throughput"
UNSET = "default"  # how a knob the config leaves to vLLM is shown


class BaselineChoice(StrEnum):
    """How a study's baseline was chosen (shown beside the ★)."""

    MARKED = "marked"
    FIRST = "first finished trial"


@dataclass(frozen=True)
class Baseline:
    """The trial every other one is compared with, and how it came to be the baseline."""

    trial: Trial
    how: BaselineChoice

    def describe(self) -> str:
        """``★ 1a2b3c4d (marked)`` for notes and titles."""
        return f"★ {self.trial.short_id} ({self.how})"


class ComparisonSource(StrEnum):
    """Where a comparison's samples come from."""

    AB = "A/B"  # one A/B's repeats, exactly as the A/B reported them
    POOLED = "pooled"  # every finished trial of each config in the study


@dataclass(frozen=True)
class Comparison:
    """Two configs judged by the A/B report, with where its samples came from.

    Attributes:
        report: The verdict (:func:`tuner.studies.ab.build_report`).
        source: An A/B's own trials, or the study's trials pooled per config.
        a: The trials of arm A (the baseline's config), in run order.
        b: The trials of arm B.
        outputs: What the output-drift guard says about B's outputs against
            the baseline's (:func:`tuner.trials.guard_check.ab_guard`).
    """

    report: ABReport
    source: ComparisonSource
    a: tuple[Trial, ...]
    b: tuple[Trial, ...]
    outputs: ArmsGuard | None = None

    def provenance(self) -> str:
        """One sentence saying which trials the verdict rests on."""
        a_ids = ", ".join(t.short_id for t in self.a)
        b_ids = ", ".join(t.short_id for t in self.b)
        if self.source is ComparisonSource.AB:
            return f"the A/B's own repeats: A {a_ids}; B {b_ids}"
        return f"every finished trial of each config, pooled: A {a_ids}; B {b_ids}"


@dataclass(frozen=True)
class WinnerPick:
    """A study's winner (``report``), or why there is none (``error``), and what the guard kept.

    Attributes:
        report: The winner and its margin (None: no trial qualifies).
        candidates: The trials ``--require-guard`` kept and those it left out, with why.
        baseline: The study's baseline, the guard's reference (None: none).
        error: Why no trial is the winner (None when there is one).
    """

    report: WinnerReport | None
    candidates: GuardFilter
    baseline: Trial | None
    error: str | None


def finished(trials: Sequence[Trial]) -> list[Trial]:
    """The trials that have results, in run order."""
    return [t for t in trials if t.results]


def higher_is_better(metric: str) -> bool:
    """The one answer to "which direction is better" for a metric (tuner.studies.stats)."""
    return metric_direction(metric) is Direction.HIGHER


def _ab_ids(raw: str | None) -> dict[str, list[str]] | None:
    """The remembered A/B's trial ids per arm; None when unset or not in remember_ab's form.

    The store is foreign data (a hand-edited or hostile file): depth-limited
    parsing, and anything but ``{"A": [ids], "B": [ids]}`` is no remembered A/B.
    """
    if not raw:
        return None
    try:
        ids = bounded.loads(raw, what="remembered A/B")
    except ValueError:  # not JSON, or nested too deeply (InputTooLargeError)
        return None
    if not isinstance(ids, dict) or not all(
        arm in ("A", "B") and isinstance(v, list) and all(isinstance(i, str) for i in v)
        for arm, v in ids.items()
    ):
        return None
    return ids


class Study:
    """One study in a trial store, as the faces query it.

    Args:
        store: The open trial store (the caller closes it).
        name: The study's name.
        fallback: Trials to show when the store cannot be read (the TUI's session list).
    """

    def __init__(self, store: TrialStore | None, name: str, fallback: Sequence[Trial] = ()) -> None:
        self.store = store
        self.name = name
        self.fallback = list(fallback)

    # -- trials -------------------------------------------------------------------
    def trials(self) -> list[Trial]:
        """Every trial of the study, oldest first (earlier sessions included)."""
        if self.store is None:
            return list(self.fallback)
        try:
            return self.store.list(study=self.name)
        except StoreError:  # the store cannot be read (read-only home): the session still knows
            return list(self.fallback)

    def finished(self) -> list[Trial]:
        return finished(self.trials())

    def _setting(self, key: str) -> str | None:
        if self.store is None:
            return None
        try:
            return self.store.study_setting(self.name, key)
        except StoreError:
            return None

    def _set(self, key: str, value: str | None) -> None:
        if self.store is not None:
            self.store.set_study_setting(self.name, key, value)

    # -- baseline -------------------------------------------------------------------
    def baseline(self, trials: Sequence[Trial] | None = None) -> Baseline | None:
        """The marked baseline if it is still a finished trial of the study, else the first one.

        The rule is :func:`tuner.trials.guard_check.choose_baseline` (the runner's
        guard reference uses the same function); this adds how it was chosen.
        """
        found = choose_baseline(
            self.trials() if trials is None else trials, self._setting(BASELINE_KEY)
        )
        if found is None:
            return None
        trial, marked = found
        return Baseline(trial, BaselineChoice.MARKED if marked else BaselineChoice.FIRST)

    def mark_baseline(self, trial_id: str) -> Baseline:
        """Keep ``trial_id`` (a finished trial of this study) as the baseline, across sessions.

        Raises:
            TrialNotFound: the id is no finished trial of this study.
        """
        trial = next((t for t in self.finished() if t.id == trial_id), None)
        if trial is None:
            raise TrialNotFound(f"trial {trial_id!r} is no finished trial of study {self.name!r}")
        if trial.is_probe:
            raise TrialNotFound(
                f"trial {trial.short_id} is a capacity probe: one load of a search, not a "
                "config's measurement; mark a trial of a run, A/B or sweep as the baseline"
            )
        self._set(BASELINE_KEY, trial.id)
        return Baseline(trial, BaselineChoice.MARKED)

    def last_result(self, trials: Sequence[Trial] | None = None) -> Trial | None:
        """The study's latest measurement of a config: the last finished trial that is no probe.

        What a face shows as "last" beside the baseline. A capacity probe is one
        load of a search, not a config's result, so it never is.
        """
        done = configs_only(finished(self.trials() if trials is None else trials))
        return done[-1] if done else None

    # -- A/B ------------------------------------------------------------------------
    def remember_ab(self, report: ABReport) -> None:
        """Keep which trials an A/B ran, so its report can be read back after a restart."""
        self._set(LAST_AB_KEY, json.dumps(report.trials, sort_keys=True))

    def last_ab(self, trials: Sequence[Trial] | None = None) -> ABReport | None:
        """The report of the study's last A/B, rebuilt from its stored trials by build_report."""
        ids = _ab_ids(self._setting(LAST_AB_KEY))
        if ids is None:
            return None
        by_id = {t.id: t for t in (self.trials() if trials is None else trials)}
        chosen = [by_id[i] for arm in ("A", "B") for i in ids.get(arm, []) if i in by_id]
        if not chosen:
            return None
        order = {i: n for n, i in enumerate(x for arm in ids.values() for x in arm)}
        chosen.sort(key=lambda t: order[t.id])
        return build_report(chosen, study=self.name, objective=chosen[0].objective or OBJECTIVE)

    # -- capacity ---------------------------------------------------------------------
    def capacity_steps(self, trials: Sequence[Trial] | None = None) -> list[CapacityStep]:
        """The study's capacity launches from their stored probes (a stopped search included)."""
        return capacity_steps(self.trials() if trials is None else trials)

    # -- the study's performance model (issue 31) ----------------------------------------
    def forecast_next(
        self,
        config: EngineConfig,
        workload: Workload,
        trials: Sequence[Trial] | None = None,
        *,
        model_info: Any = None,
        node: Target | None = None,
    ) -> Forecast:
        """What the study's model expects of running ``config`` on ``workload`` next
        (tuner.perfmodel.forecast: the forecast a run then stores), or why it cannot say.

        It is made for the node of the study's latest measured trial, else for ``node`` (this
        one); with ``model_info`` (the analysed model) on a GPU the table knows, the GPU
        prior speaks before the fitted model can (tuner.perfmodel.prior).
        """
        from tuner.perfmodel.forecast import NO_TRIALS, Forecast, forecast, latest_measured
        from tuner.perfmodel.prior import gpu_prior

        trials = self.trials() if trials is None else trials
        latest = latest_measured(trials)
        if latest is not None:
            where = (latest.platform, latest.vllm_version, list(latest.gpu_names))
        elif node is not None and node.gpu_name and model_info is not None:
            where = (node.platform, node.vllm_version, [node.gpu_name])
        else:
            return Forecast(reason=NO_TRIALS)
        candidate = Trial(config=config, workload=workload, study=self.name,
                          platform=where[0], vllm_version=where[1], gpu_names=where[2])  # fmt: skip
        prior = gpu_prior(model_info, candidate.gpu_names, config.engine)
        return forecast(trials, candidate, prior)

    # -- detached jobs --------------------------------------------------------------
    def job_shown(self) -> str | None:
        """The study-service job whose end a TUI last showed (tui.detached): announced once."""
        return self._setting(SHOWN_JOB_KEY)

    def mark_job_shown(self, job_id: str) -> None:
        self._set(SHOWN_JOB_KEY, job_id)

    # -- compare ------------------------------------------------------------------------
    def pick_other(self, baseline: Trial, selected: str | None) -> Trial | None:
        """The trial to compare with ``baseline``: the selected one, never the baseline's config.

        A selected trial of the baseline's own config (the ★ row itself) is replaced
        by the newest finished trial of another config; None when there is none.
        """
        done = configs_only(self.finished())
        base_point = point_key(baseline)
        chosen = next((t for t in done if t.id == selected), None)
        if chosen is not None and point_key(chosen) != base_point:
            return chosen
        others = [t for t in done if point_key(t) != base_point]
        return others[-1] if others else None

    def pick_reason(self, baseline: Trial, selected: str | None, pick: Trial) -> str | None:
        """Why B is not the trial under the cursor (None when it is, or nothing was selected).

        Compare never silently shows another trial than the one the user pointed at.
        """
        if selected is None or pick.id == selected:
            return None
        chosen = next((t for t in self.trials() if t.id == selected), None)
        where = f"the trial under the cursor ({selected[:8]})"
        if chosen is None:
            why = f"{where} is not in this study"
        elif chosen.is_probe:
            why = f"{where} is a capacity probe (one load of a search)"
        elif point_key(chosen) == point_key(baseline):
            why = f"{where} has the baseline's config"
        else:
            why = f"{where} has not finished ({chosen.status})"
        return f"{why}: B is {pick.short_id}, the newest finished trial of another config"

    def compare(self, a: Trial, b: Trial) -> Comparison:
        """The verdict on B's config against A's: that pair's A/B when there is one, else pooled."""
        trials = self.trials()
        report = self.last_ab(trials)
        a_point, b_point = point_key(a), point_key(b)
        if report is not None:
            by_id = {t.id: t for t in trials}
            arm_a = tuple(by_id[i] for i in report.trials.get("A", []) if i in by_id)
            arm_b = tuple(by_id[i] for i in report.trials.get("B", []) if i in by_id)
            if (
                arm_a
                and arm_b
                and point_key(arm_a[0]) == a_point
                and point_key(arm_b[0]) == b_point
            ):
                return Comparison(
                    report, ComparisonSource.AB, arm_a, arm_b, self._outputs(arm_a, arm_b, trials)
                )
        done = configs_only(finished(trials))
        pool_a = tuple(t for t in done if point_key(t) == a_point)
        pool_b = tuple(t for t in done if point_key(t) == b_point)
        armed = [replace(t, arm="A") for t in pool_a] + [replace(t, arm="B") for t in pool_b]
        pooled = build_report(armed, study=self.name, objective=a.objective or OBJECTIVE)
        return Comparison(
            pooled, ComparisonSource.POOLED, pool_a, pool_b, self._outputs(pool_a, pool_b, trials)
        )

    def _outputs(
        self, a: Sequence[Trial], b: Sequence[Trial], trials: Sequence[Trial]
    ) -> ArmsGuard:
        base = self.baseline(trials)
        return ab_guard(a, b, base.trial if base else None)

    # -- output-drift guard ----------------------------------------------------------------
    def guards(self, trials: Sequence[Trial] | None = None) -> dict[str, TrialGuard]:
        """Each trial's output-guard verdict against the baseline, by trial id.

        The results table's column and the report's section; ``label()`` is
        the cell, ``describe()`` the sentence.
        """
        ts = self.trials() if trials is None else list(trials)
        base = self.baseline(ts)
        return {g.trial.id: g for g in guard_verdicts(ts, base.trial if base else None)}

    def winner_candidates(
        self, require: GuardRequirement | None, trials: Sequence[Trial] | None = None
    ) -> GuardFilter:
        """The trials that may be named the winner under ``--require-guard same|close``."""
        ts = self.trials() if trials is None else list(trials)
        base = self.baseline(ts)
        return require_guard(ts, require, base.trial if base else None)

    def winner(
        self,
        objective: str | None = None,
        constraints: Sequence[Constraint] | None = None,
        require: GuardRequirement | None = None,
    ) -> WinnerPick:
        """The study's winner among the trials ``--require-guard`` keeps (``tunelab winner``).

        ``constraints`` None reads the study's own SLO bounds (tuner.studies.winner);
        an empty list judges without any. Nothing is raised for "no winner": the pick
        says why, with what the guard left out.
        """
        ts = self.trials()
        base = self.baseline(ts)
        candidates = require_guard(ts, require, base.trial if base else None)
        try:
            report = pick_winner(
                candidates.kept, study=self.name, objective=objective, constraints=constraints
            )
        except WinnerError as exc:
            return WinnerPick(None, candidates, base.trial if base else None, str(exc))
        return WinnerPick(report, candidates, base.trial if base else None, None)

    # -- export ------------------------------------------------------------------------
    def export_choice(self) -> tuple[Trial | None, str]:
        """The trial the export dialog offers first and the sentence that says why.

        After an A/B, its verdict decides (B only when significantly better), and the
        arm's representative is exported: the repeat nearest the arm's mean, never its
        luckiest one (the preset's ``objective_value`` is then the arm's mean:
        tuner.export.trial); else the study's winner (tuner.studies.winner).
        """
        trials = self.trials()
        report = self.last_ab(trials)
        if report is not None:
            arm = "B" if report.verdict is Verdict.B_BETTER else "A"
            by_id = {t.id: t for t in finished(trials)}
            members = [by_id[i] for i in report.trials.get(arm, []) if i in by_id]
            if members:
                keep = (
                    "B (significantly better)"
                    if arm == "B"
                    else "A, the baseline (B is not significantly better)"
                )
                chosen = representative(members, report.objective)
                return chosen, (
                    f"A/B: {report.summary()} → exporting {keep}: trial {chosen.short_id}, the "
                    f"repeat nearest the arm's mean of {len(members)}"
                )
        try:
            winner = pick_winner(trials, study=self.name)
        except WinnerError as exc:
            return None, str(exc)
        return winner.winner.representative(), winner.statement


def export_trial(
    trial: Trial,
    directory: Path,
    formats: Sequence[str],
    *,
    force: bool = False,
    store_path: Path | None = None,
) -> list[Path]:
    """Write ``trial`` as a preset (workload, results with their noise, trial id) in ``formats``.

    The same export as ``tunelab export TRIAL`` (tuner.export builds the preset), with
    the same AITER untuned-shape CSVs and tuning script when its engine logged any.

    Raises:
        ExportError: the preset cannot be built or written; OSError: the directory.
    """
    directory.mkdir(parents=True, exist_ok=True)
    preset = preset_from_trial(trial.id, store_path=store_path)
    bundle = untuned_bundle(trial.id, preset.name, only=False, store_path=store_path)
    return export(preset, directory, formats, force=force, extra=bundle.files)


@dataclass(frozen=True)
class KnobChange:
    """One knob whose value differs from the baseline's (``default``: not set there)."""

    key: str
    baseline: str
    value: str


def knob_changes(base: Trial | None, trial: Trial) -> list[KnobChange]:
    """Knobs (env and engine) whose value differs from the baseline's config, by key.

    The one answer to "what does this trial change": the results table and the
    study report both show it.
    """
    if base is None:
        return []
    mine = _knobs(trial)
    theirs = _knobs(base)
    return [
        KnobChange(key, value_text(theirs.get(key)), value_text(mine.get(key)))
        for key in sorted(set(mine) | set(theirs))
        if mine.get(key) != theirs.get(key)
    ]


def _knobs(trial: Trial) -> dict[str, EngineValue]:
    return {**trial.config.env, **trial.config.engine}


def value_text(value: object) -> str:
    """A knob or tag value as shown: ``default`` when the config leaves it to vLLM."""
    return UNSET if value is None else str(value)
