"""What a study report says, derived from stored trials by the core's own functions.

Nothing here is computed twice: the baseline, the A/B verdict and the trial to
export are the application layer's (:class:`tuner.lab.study.Study`, the same
answers the TUI and the CLI show), the Pareto front is
:func:`tuner.studies.pareto.pareto_front` and the launch command
:func:`tuner.export.script.render_script`. This module only groups their
answers per study so the renderers have plain data to lay out. The output
guard's verdicts are :func:`tuner.trials.guard_check.guard_verdicts` against
that same baseline, and the A/B's "outputs" line is
:func:`tuner.trials.guard_check.ab_guard` on the A/B's own arms.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner import __version__
from tuner.bench.metrics import delivery_warning
from tuner.engine.effective import of_trial
from tuner.export.script import render_script
from tuner.lab.study import Baseline, KnobChange, Study, knob_changes, value_text
from tuner.perfmodel.forecast import record_of, record_text, score_of
from tuner.policy import Consent, violations
from tuner.profiles.explain import Explanation, FamilyDelta
from tuner.profiles.record import ProfileRecord
from tuner.studies.ab import ABReport, build_report
from tuner.studies.capacity_steps import CapacityStep, ProbeView, configs_only, probe_view
from tuner.studies.common import value_of
from tuner.studies.pareto import pareto_front
from tuner.trials.guard_check import ArmsGuard, TrialGuard, ab_guard, guard_of, guard_verdicts
from tuner.trials.model import Trial, metric

# The headline metrics every trial row shows, in the order a reader scans them.
ROW_METRICS = (
    "output_throughput",
    "request_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "p99_e2el_ms",
)
TELEMETRY_KEYS = ("peak_vram_bytes", "mean_power_w", "energy_j", "tokens_per_joule")
LATENCY_FOR_FRONT = ("p99_ttft_ms", "p99_itl_ms")


@dataclass(frozen=True)
class GpuTimeline:
    """One GPU over a trial's measured run: the stored window's samples (tuner.telemetry.sampler).

    Lists run in parallel; a reading the GPU did not give stays None (a gap
    in the plot, never a zero).
    """

    index: int
    seconds: list[float]
    power_w: list[float | None]
    gfx_pct: list[float | None]
    vram_gib: list[float | None]


def timelines(trial: Trial) -> list[GpuTimeline]:
    """The GPUs' timelines stored with ``trial``; empty without GPU telemetry.

    A trial stored by a tunelab that kept no series, or a hand-edited row, gives
    no timeline rather than an error: the report is made from whatever is there.
    """
    telemetry = trial.telemetry if isinstance(trial.telemetry, dict) else {}
    gpus = telemetry.get("gpus")
    out: list[GpuTimeline] = []
    for gpu in gpus if isinstance(gpus, list) else []:
        series = gpu.get("series") if isinstance(gpu, dict) else None
        points = [
            p
            for p in (series if isinstance(series, list) else [])
            if isinstance(p, list | tuple) and len(p) == 4 and _number(p[0]) is not None
        ]
        if not points:
            continue
        index = gpu.get("index")
        out.append(
            GpuTimeline(
                index=index if isinstance(index, int) and not isinstance(index, bool) else len(out),
                seconds=[float(p[0]) for p in points],
                power_w=[_number(p[1]) for p in points],
                gfx_pct=[_number(p[2]) for p in points],
                vram_gib=[None if (v := _number(p[3])) is None else v / 2**30 for p in points],
            )
        )
    return out


def _number(value: Any) -> float | None:
    """A finite stored number, or None (a hand-edited row may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) else None


@dataclass
class TrialRow:
    """A trial as the report lists it."""

    trial: Trial
    changes: list[KnobChange]
    metrics: dict[str, float | None]
    telemetry: dict[str, float | None]
    is_baseline: bool = False
    delivery: str | None = None
    mismatches: list[str] = field(default_factory=list)
    guard: TrialGuard | None = None
    timelines: list[GpuTimeline] = field(default_factory=list)
    probe: ProbeView | None = None  # a capacity probe: judged by its SLO, not the baseline
    untuned: str = ""  # AITER shapes that ran on default kernels (issue 29), "" for none

    @property
    def notes(self) -> list[str]:
        """What the report's notes cell says: what vLLM ran otherwise, one-piece delivery,
        AITER's untuned shapes and why the trial failed (html and markdown alike)."""
        extra = [self.delivery, self.untuned, self.trial.failure_reason]
        return [*self.mismatches, *(n for n in extra if n)]

    @property
    def guard_seconds(self) -> float | None:
        """What the guard cost this trial (None when it did not run)."""
        run = guard_of(self.trial)
        return None if run is None else run.seconds

    @property
    def guard_probes(self) -> int | None:
        run = guard_of(self.trial)
        return None if run is None else len(run.probes)

    @property
    def role(self) -> str:
        """What the trial was in its study (``A1``, ``max-num-seqs=64 #1``), empty for a run."""
        return "" if self.label == self.trial.short_id else self.label

    @property
    def label(self) -> str:
        """``A1``, ``max-num-seqs=64 #1`` or the short id: how the trial is named in plots."""
        t = self.trial
        if self.probe is not None:
            return self.probe.cell()
        if t.arm:
            return t.arm_label
        if t.tags.get("kind") == "sweep":
            return f"{t.tags.get('knob')}={t.tags.get('value')} #{t.repeat}"
        return t.short_id


@dataclass(frozen=True)
class SweepCurve:
    """A swept knob: per value, the objective's mean and every sample."""

    knob: str
    objective: str
    values: list[str]
    means: list[float]
    samples: list[list[float]]


@dataclass(frozen=True)
class ForecastPoint:
    """A trial's throughput as the study model forecast it before the run, and as measured.

    Attributes:
        label: The trial's row label.
        predicted: The forecast output tok/s.
        low: Its stated 80 % interval's low end.
        high: Its high end.
        measured: What the run then measured.
        inside: The measured figures inside their intervals (tuner.perfmodel.forecast).
    """

    label: str
    predicted: float
    low: float
    high: float
    measured: float
    inside: bool


@dataclass(frozen=True)
class FrontPoint:
    """One finished trial on the throughput-vs-latency plane."""

    label: str
    latency_ms: float
    throughput: float
    on_front: bool


# Op names per family and arm the "why B is faster" table names (the trace keeps three).
LARGEST_OPS = 2


def shown_families(explanation: Explanation) -> list[FamilyDelta]:
    """The families a report shows: those either arm spent time in, in the core's order.

    A family neither arm touched (MoE on a dense model, communication on one GPU)
    is a row of zeros that explains nothing, so the chart and tables leave it out.
    """
    return [r for r in explanation.rows if r.a_ms or r.b_ms]


def largest_ops(record: ProfileRecord | None, family: str) -> list[str]:
    """The names of ``family``'s largest ops or kernels in an arm's trace (foreign text).

    They are what the reader searches for in the trace or in vLLM's source to
    see where a family's time went; the trace's own names, as stored.
    """
    if record is None or record.summary is None:
        return []
    entries = record.summary.top.get(family) or []
    return [str(e[0]) for e in entries[:LARGEST_OPS] if isinstance(e, list | tuple) and e]


@dataclass
class ReportData:
    """Everything one study's report shows."""

    study: str
    generated_at: float
    tunelab_version: str
    host: str
    vllm_versions: list[str]
    platforms: list[str]
    gpu_names: list[str]
    objective: str
    rows: list[TrialRow]
    baseline: Baseline | None
    ab: ABReport | None
    sweeps: list[SweepCurve]
    fronts: dict[str, list[FrontPoint]]
    chosen: Trial | None
    why_chosen: str
    launch_script: str | None
    launch_note: str = ""
    ab_guard: ArmsGuard | None = None
    capacity: list[CapacityStep] = field(default_factory=list)
    forecasts: list[ForecastPoint] = field(default_factory=list)
    forecast_record: str = ""

    @property
    def guarded(self) -> bool:
        """Whether any trial of the study ran the output guard."""
        return any(r.guard is not None and r.guard.verdict is not None for r in self.rows)

    @property
    def counts(self) -> dict[str, int]:
        """Trials per status, for the header line."""
        out: dict[str, int] = {}
        for row in self.rows:
            out[str(row.trial.status)] = out.get(str(row.trial.status), 0) + 1
        return out


def collect(study: Study) -> ReportData:
    """The report of ``study`` from its stored trials (any status)."""
    ordered = sorted(study.trials(), key=lambda t: t.created_at)
    base = study.baseline(ordered)
    # A capacity probe's objective is its SLO's key: the study's is its configs' trials'.
    objective = next((t.objective for t in configs_only(ordered)), "output_throughput")
    base_trial = base.trial if base else None
    guards = guard_verdicts(ordered, base_trial)
    rows = [_row(t, base_trial, g) for t, g in zip(ordered, guards, strict=True)]
    chosen, why = study.export_choice()
    ab = study.last_ab(ordered) or _arms_report(ordered, study.name, objective)
    return ReportData(
        study=study.name,
        generated_at=time.time(),
        tunelab_version=__version__,
        host=platform.node(),
        vllm_versions=_distinct(t.vllm_version for t in ordered),
        platforms=_distinct(t.platform for t in ordered),
        gpu_names=_distinct(n for t in ordered for n in t.gpu_names),
        objective=objective,
        rows=rows,
        baseline=base,
        ab=ab,
        sweeps=_sweeps(ordered, objective),
        fronts={key: _front(rows, key) for key in LATENCY_FOR_FRONT},
        chosen=chosen,
        why_chosen=why,
        **_launch(chosen),
        ab_guard=_ab_guard(ab, ordered, base_trial),
        capacity=study.capacity_steps(ordered),
        forecasts=_forecasts(rows),
        forecast_record=record_text(record_of(ordered)),
    )


def _forecasts(rows: Sequence[TrialRow]) -> list[ForecastPoint]:
    """Every measured trial whose forecast was known before its run (issue 31's record)."""
    out = []
    for row in rows:
        score = score_of(row.trial)
        if score is None or (band := score.forecast.throughput_interval()) is None:
            continue
        predicted = score.forecast.output_throughput
        assert predicted is not None  # a known forecast (score_of) has both figures
        out.append(ForecastPoint(row.label, predicted, band[0], band[1],
                                 score.output_throughput, score.inside))  # fmt: skip
    return out


def _launch(chosen: Trial | None) -> dict[str, Any]:
    """The launch command ``tunelab export`` would write for ``chosen``, or why there is none.

    Export refuses what the policy refuses (tuner.policy) unless the user consents, so the
    report never shows a command export would not write: it names the refusal instead.
    """
    if chosen is None:
        return {"launch_script": None}
    refused = [
        v for v in violations(chosen.config, Consent()) if v.table == "engine" or v.kind != "secret"
    ]
    if refused:
        names = ", ".join(v.key for v in refused)
        return {
            "launch_script": None,
            "launch_note": (
                f"not shown: tunelab's policy refuses {names} "
                f"(`tunelab export {chosen.id} --allow-code/--allow-env NAME` writes it if you "
                "trust it)"
            ),
        }
    return {"launch_script": render_script(chosen.config, header=[])}


def _ab_guard(ab: ABReport | None, trials: Sequence[Trial], base: Trial | None) -> ArmsGuard | None:
    """The guard's verdict on the A/B's own arms, against the study's baseline."""
    if ab is None:
        return None
    by_id = {t.id: t for t in trials}
    arms = {arm: [by_id[i] for i in ab.trials.get(arm, []) if i in by_id] for arm in ("A", "B")}
    return ab_guard(arms["A"], arms["B"], base)


def _row(trial: Trial, base: Trial | None, guard: TrialGuard | None = None) -> TrialRow:
    results = trial.results or {}
    probe = probe_view(trial)
    return TrialRow(
        trial=trial,
        # A probe ran one load of a search: its config is not set against the baseline's.
        changes=[] if probe is not None else knob_changes(base, trial),
        metrics={k: value_of(trial, k) for k in ROW_METRICS},
        telemetry={k: metric(trial, k) for k in TELEMETRY_KEYS},
        is_baseline=base is not None and trial.id == base.id,
        delivery=delivery_warning(results, short=True) if results else None,
        mismatches=_mismatches(trial),
        guard=guard,
        timelines=timelines(trial),
        probe=probe,
        untuned=trial.untuned_shapes.summary(),
    )


def _mismatches(trial: Trial) -> list[str]:
    """What vLLM ran that differs from what the trial asked for (tuner.engine.effective)."""
    effective = of_trial(trial.effective)
    if effective is not None:
        return [m.message() for m in effective.mismatches]
    if (  # trials stored before effective configs were recorded: the backend alone
        trial.backend_requested
        and trial.backend_actual
        and trial.backend_requested.upper() != trial.backend_actual.upper()
    ):
        return [
            f"requested attention-backend={trial.backend_requested}, "
            f"but vLLM ran {trial.backend_actual}"
        ]
    return []


def _arms_report(trials: Sequence[Trial], study: str, objective: str) -> ABReport | None:
    """An A/B run by the CLI (trials with arms, no remembered A/B): its arms, as stored."""
    arms = [t for t in configs_only(trials) if t.arm in ("A", "B")]
    if not {t.arm for t in arms} >= {"A", "B"}:
        return None
    return build_report(arms, study=study, objective=objective)


def _sweeps(trials: Sequence[Trial], objective: str) -> list[SweepCurve]:
    by_knob: dict[str, dict[str, list[float]]] = {}
    for t in trials:
        if t.tags.get("kind") != "sweep" or (v := value_of(t, objective)) is None:
            continue
        points = by_knob.setdefault(str(t.tags.get("knob")), {})
        points.setdefault(value_text(t.tags.get("value")), []).append(v)
    curves = []
    for knob, points in by_knob.items():
        values = list(points)
        curves.append(
            SweepCurve(
                knob=knob,
                objective=objective,
                values=values,
                means=[statistics.fmean(points[v]) for v in values],
                samples=[points[v] for v in values],
            )
        )
    return curves


def _front(rows: Sequence[TrialRow], latency_key: str) -> list[FrontPoint]:
    pts = [
        (r.label, lat, thr)
        for r in rows
        if r.probe is None  # a probe measured a load of a search, not a config
        and (lat := r.metrics.get(latency_key)) is not None
        and (thr := r.metrics.get("output_throughput")) is not None
    ]
    front = set(pareto_front([(lat, thr) for _, lat, thr in pts]))
    return [FrontPoint(label, lat, thr, i in front) for i, (label, lat, thr) in enumerate(pts)]


def _distinct(values: Any) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        if v:
            seen.setdefault(str(v), None)
    return list(seen)
