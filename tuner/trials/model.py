"""A trial: one engine config, one workload, one objective, and everything measured.

The trial is the unit the store keeps and every study (A/B, sweep, search)
is built from. It is plain data so the store can write it at each state
change, the CLI can print it as JSON and the TUI can render it; nested parts
(findings, benchmark results, server view, telemetry) are kept as the JSON
dicts their producers already emit, so a stored trial reads the same
without importing the benchmark or telemetry code.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.engine.aiter_shapes import UntunedShapes
from tuner.rules.types import Finding
from tuner.trials.shapes import MAX_MEASURED, check_trial

DEFAULT_STUDY = "default"
DEFAULT_OBJECTIVE = "output_throughput"
# What a capacity probe carries in tags["kind"] (tuner.studies.capacity_run).
PROBE_KIND = "capacity"
# How a trial's failure reason starts when the benchmark refused its workload itself (no
# tokenizer for text prompts, an unreadable dataset): no load of that workload can run.
WORKLOAD_REFUSED = "the benchmark refused the workload"
# The tag a trial stopped by pruning carries (its decision, a dict): tuner.studies.pruning.
PRUNED_TAG = "pruned"

# Objectives where smaller is better (latencies); everything else is maximised.
_MINIMISE_PREFIXES = ("mean_", "median_", "std_", "p")
_MINIMISE_SUFFIXES = ("_ms",)


class TrialStatus(StrEnum):
    """Where a trial is in its life; the last four are final."""

    QUEUED = "queued"
    SKIPPED = "skipped"
    STARTING = "starting"
    MEASURING = "measuring"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def active(self) -> bool:
        """An engine may be running for the trial (what ``recover()`` cleans up)."""
        return self in (TrialStatus.STARTING, TrialStatus.MEASURING)

    @property
    def final(self) -> bool:
        """Nothing more will happen to the trial."""
        return self in (
            TrialStatus.SKIPPED,
            TrialStatus.DONE,
            TrialStatus.FAILED,
            TrialStatus.INTERRUPTED,
        )


def new_trial_id() -> str:
    """A short random id (12 hex digits): unique enough per store, short enough to type."""
    return uuid.uuid4().hex[:12]


# Keys a trial can be ranked by: the benchmark's totals and latency statistics
# (vLLM bench names), and the telemetry window's energy figures.
OBJECTIVE_KEYS = (
    "output_throughput",
    "request_throughput",
    "total_token_throughput",
    "request_goodput",
    "max_output_tokens_per_s",
    "tokens_per_joule",
)
_LATENCY_RE = re.compile(r"^(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")


def validate_objective(name: str) -> str:
    """Returns ``name`` if trials can be ranked by it.

    Raises:
        ValueError: For an unknown key; the message lists the valid ones.
    """
    if name in OBJECTIVE_KEYS or _LATENCY_RE.match(name):
        return name
    raise ValueError(
        f"unknown objective {name!r}; use one of {', '.join(OBJECTIVE_KEYS)} or a latency "
        "statistic such as p99_ttft_ms, median_itl_ms, mean_e2el_ms (lower is better)"
    )


def objective_minimised(name: str) -> bool:
    """True for latency-like objectives (``p99_ttft_ms``, ``mean_e2el_ms``): lower is better."""
    return name.endswith(_MINIMISE_SUFFIXES) and name.startswith(_MINIMISE_PREFIXES)


@dataclass
class Trial:
    """One measured (or skipped, or failed) run of a config under a workload.

    Attributes:
        config: The engine config that was (or will be) started.
        workload: The benchmark workload.
        study: Name of the study the trial belongs to.
        objective: The result key that ranks trials (vLLM bench key, e.g.
            ``output_throughput``; latency keys such as ``p99_ttft_ms`` are minimised).
        id: Short unique id.
        status: See TrialStatus.
        findings: Rule findings, errors first (stored in ``Finding.to_dict()`` form).
        backend_requested: ``attention-backend`` the config asks for (None: vLLM picks).
        backend_actual: The backend vLLM reported using.
        backend_inferred: True when the backend was implied by the platform, not logged.
        startup_seconds: Engine launch to healthy.
        results: The benchmark result (``BenchResult.to_dict()``, vLLM key names).
        server: The server's own view from /metrics (KV-cache peak, preemptions...).
        telemetry: GPU window summary over the measured run: peak VRAM, mean
            power, energy and tokens per joule (None without GPU telemetry).
        vllm_version: vLLM version of the engine's interpreter.
        platform: rocm, cuda or cpu.
        gpu_names: Names of the GPUs the engine could see.
        gpu_slot: The CUDA_VISIBLE_DEVICES value the engine ran with, if any.
        log_path: The engine's log file.
        failure_reason: Why the trial failed or was interrupted.
        created_at, started_at, finished_at: Unix times.
        arm: A/B arm label ("A"/"B"), or None.
        repeat: Repeat index within an A/B or sweep point, or None.
        tags: Free labels for studies (e.g. the swept knob and value).
        timings: Seconds spent per phase (rules, start, bench, stop, total),
            from which the tuner's own overhead is computed.
        engine_pid, engine_created: The engine root process while it runs
            (pid + create time, so recovery never kills a reused pid).
        engine_token: The random token put into the engine's environment
            (``TUNELAB_ENGINE_TOKEN``): recovery kills a leftover engine only
            when pid, create time and this token all match (issue 19).
        owner_pid, owner_created: The tunelab process running the trial.
        effective: What vLLM really ran, read from its start-up log, with the
            knobs that differ from the request (``EffectiveConfig.to_dict()``
            form; typed via ``tuner.engine.effective.of_trial``).
        guard: The output-drift guard's probes on this trial's engine
            (``GuardRun.to_dict()`` form; judged against the study baseline by
            ``tuner.guard.compare``), None when it did not run.
        environment: What the engine ran on (``tuner.environment.Fingerprint``
            in ``to_dict`` form: vLLM and torch builds, driver, GPU, power cap),
            recorded when its engine started; None for trials from before
            schema 6 or that never started an engine.
        untuned: The kernel shapes the engine ran on AITER's default kernels so far
            (``tuner.engine.aiter_shapes.UntunedShapes`` in ``to_dict`` form), read
            from its log when the measured run ended; None before schema 7 or
            without an engine log.
        profile: A torch-profiler window on its engine after the measured run and
            the guard (``tuner.profiles.capture``; issue 29): the trace's path, the
            window's load and times, and its summary by kernel family — or the
            reason it could not be taken; None when none was asked (schema 8).
        prediction: The study model's forecast of this trial, made as its measured
            run began from the study's measured trials
            (``tuner.perfmodel.forecast.Forecast`` in ``to_dict`` form; issue 31):
            the figures with their 80 % intervals, or why the model could not say;
            None before schema 9 or for a trial outside a study run.
    """

    config: EngineConfig
    workload: Workload
    study: str = DEFAULT_STUDY
    objective: str = DEFAULT_OBJECTIVE
    id: str = field(default_factory=new_trial_id)
    status: TrialStatus = TrialStatus.QUEUED
    findings: list[Finding] = field(default_factory=list)
    backend_requested: str | None = None
    backend_actual: str | None = None
    backend_inferred: bool = False
    startup_seconds: float | None = None
    results: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    vllm_version: str | None = None
    platform: str | None = None
    gpu_names: list[str] = field(default_factory=list)
    gpu_slot: str | None = None
    log_path: str | None = None
    failure_reason: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    arm: str | None = None
    repeat: int | None = None
    tags: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    engine_pid: int | None = None
    engine_created: float | None = None
    engine_token: str | None = None
    owner_pid: int | None = None
    owner_created: float | None = None
    effective: dict[str, Any] | None = None
    guard: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    untuned: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, TrialStatus):
            self.status = TrialStatus(self.status)
        if self.backend_requested is None:
            wanted = self.config.engine.get("attention-backend")
            self.backend_requested = str(wanted) if wanted else None

    # -- reading ------------------------------------------------------------
    @property
    def short_id(self) -> str:
        """The first 8 characters: what tables print."""
        return self.id[:8]

    @property
    def arm_label(self) -> str:
        """``A1``, ``B2``: the A/B arm and its launch counted from 1, as every face names a
        repeat (``A`` alone for a trial pooled into an arm); "" outside an A/B."""
        if not self.arm:
            return ""
        return f"{self.arm}{self.repeat + 1}" if self.repeat is not None else self.arm

    @property
    def config_id(self) -> str:
        return self.config.config_id

    @property
    def is_probe(self) -> bool:
        """One load of a capacity search (tuner.studies.capacity_run), not a config's measurement:
        never a baseline, a Δ, a point of the Pareto front or a winner (issue 32)."""
        return self.tags.get("kind") == PROBE_KIND

    @property
    def objective_value(self) -> float | None:
        """The objective's value in the results, None when missing or not a finite number."""
        return metric(self, self.objective)

    @property
    def minimise(self) -> bool:
        """Whether a smaller objective value is better."""
        return objective_minimised(self.objective)

    @property
    def untuned_shapes(self) -> UntunedShapes:
        """The kernel shapes its engine ran on AITER's default kernels (empty: none, or not
        recorded); ``.summary()`` is the sentence every face shows (issue 29)."""
        return UntunedShapes.from_dict(self.untuned)

    @property
    def elapsed_s(self) -> float | None:
        """Seconds from start to end of the run (None if it never started or has not ended)."""
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    # -- (de)serialisation ----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``--json`` prints and the store writes)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "config":
                value = value.canonical()
            elif f.name == "workload":
                value = value.to_dict()
            elif f.name == "status":
                value = str(value)
            elif f.name == "findings":
                value = [finding.to_dict() for finding in value]
            out[f.name] = value
        out["config_id"] = self.config_id
        out["objective_value"] = self.objective_value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trial:
        """Inverse of to_dict (derived keys are ignored; unknown keys are an error).

        Every field must have the shape its producer writes (tuner.trials.shapes):
        a stored or streamed trial is foreign data, and its readers do arithmetic.

        Raises:
            ValueError: an unknown field, or one of the wrong shape (``ShapeError``).
            TypeError: a config or workload that does not fit its dataclass.
        """
        check_trial(data)
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k not in ("config_id", "objective_value")}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown trial field(s): {', '.join(sorted(unknown))}")
        cfg = values["config"]
        values["config"] = cfg if isinstance(cfg, EngineConfig) else EngineConfig(**cfg)
        wl = values["workload"]
        values["workload"] = wl if isinstance(wl, Workload) else Workload.from_dict(wl)
        values["findings"] = [
            f if isinstance(f, Finding) else Finding.from_dict(f)
            for f in values.get("findings") or []
        ]
        return cls(**values)


# What a measured figure can be: at most MAX_MEASURED (tuner.trials.shapes) and, unless
# it is 0, not below 1e-30. A stored 1e308 or 5e-324 is corruption, and the statistics
# over it (squares, log ratios, exp) overflow.
MIN_MEASURED = 1e-30


def measured(value: Any) -> float | None:
    """``value`` as a float when it can be a measured figure (see MAX_MEASURED), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):  # compared exactly: float() of a huge int overflows
        return float(value) if abs(value) <= MAX_MEASURED else None
    if not math.isfinite(value):
        return None
    if value != 0 and not MIN_MEASURED <= abs(value) <= MAX_MEASURED:
        return None
    return value


def metric(trial: Trial, key: str) -> float | None:
    """A numeric result of ``trial`` by vLLM bench key (also ``tokens_per_joule``, ``energy_j``...).

    None when missing, not a number, not finite or beyond what a measurement can
    be (:func:`measured`): a hand-edited or hostile row ranks nowhere.
    """
    sources = [trial.results, trial.telemetry]
    for source in sources:
        value = measured(source.get(key)) if isinstance(source, dict) else None
        if value is not None:
            return value
    return None
