"""A trial's forecast before it runs, from its study's measured trials, and its score after.

"Tell me before I spend ten minutes": a trial about to run is predicted by the model of the
study's finished trials that share its context (:mod:`tuner.perfmodel.observation`: the
same model, env, platform, release, other engine arguments and workload shape), with the
model's 80 % interval. The forecast is stored on the trial before its measured run
(:class:`~tuner.trials.model.Trial`'s ``prediction``), so every face can later show how far
it was off, and ``tunelab model`` can score the study's stored forecasts against what was
then measured — the model's record, not a re-fit. Where the model cannot speak (fewer
than :data:`~tuner.perfmodel.study.MIN_TRIALS` comparable trials, a knob it does not
model, a workload its wave arithmetic does not describe) the forecast says which, and
nothing is guessed: "unknown until run".
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.perfmodel.bands import interval
from tuner.perfmodel.observation import (
    MODELLED_ENGINE_KEYS,
    Observation,
    context_text,
    observation_of_trial,
    trial_parts,
)

if TYPE_CHECKING:
    from tuner.perfmodel.prior import Prior

__all__ = [
    "Forecast",
    "ForecastScore",
    "forecast",
    "forecast_record",
    "latest_measured",
    "record_of",
    "record_text",
    "score_of",
]

# Three step costs: as in tuner.perfmodel.study (not imported: numpy behind it loads only
# when a forecast is fitted, so a face that scores stored forecasts stays light).
MIN_TRIALS = 3
NO_TRIALS = "no measured trial of this study to learn from yet"
_KNOWN = "max-num-seqs, max-num-batched-tokens, concurrency, the lengths and the request count"


@dataclass(frozen=True)
class Forecast:
    """What the study's model expects of a trial, or why it cannot say.

    Attributes:
        output_throughput: Output tokens per second (None: unknown until run).
        itl_ms: The engine's mean inter-token latency (None: unknown until run).
        throughput_band: Relative half-width of the throughput's 80 % interval.
        itl_band: Relative half-width of the ITL's 80 % interval.
        trials: The comparable measured trials the model was fitted on.
        reason: Why there is no forecast ("" when there is one).
        source: Where a forecast made before the model could be fitted came from (the GPU
            table's prior, :mod:`tuner.perfmodel.prior`); "" for the fitted model's.
    """

    output_throughput: float | None = None
    itl_ms: float | None = None
    throughput_band: float = 0.0
    itl_band: float = 0.0
    trials: int = 0
    reason: str = ""
    source: str = ""

    @property
    def known(self) -> bool:
        return self.output_throughput is not None and self.itl_ms is not None

    def throughput_interval(self) -> tuple[float, float] | None:
        if self.output_throughput is None:
            return None
        return interval(self.output_throughput, self.throughput_band)

    def itl_interval(self) -> tuple[float, float] | None:
        return None if self.itl_ms is None else interval(self.itl_ms, self.itl_band)

    def describe(self) -> str:
        """``model: ~2,340 tok/s (1,500–3,200), engine ITL ~4.1 ms (…), from 5 trials``."""
        tput, itl = self.throughput_interval(), self.itl_interval()
        if tput is None or itl is None or self.itl_ms is None:
            return f"model: unknown until run — {self.reason}"
        if self.source:
            came = f"the {self.source}" + (
                f", scaled to {self.trials} trial(s)" if self.trials else ", before any trial"
            )
        else:
            came = f"{self.trials} trial(s)"
        return (
            f"model: ~{self.output_throughput:,.0f} tok/s ({tput[0]:,.0f}–{tput[1]:,.0f}), "
            f"engine ITL ~{self.itl_ms:.2f} ms ({itl[0]:.2f}–{itl[1]:.2f}), 80 % intervals "
            f"from {came}"
        )

    def short(self) -> str:
        """``next run ≈ 2,340 tok/s (1,500–3,200) · ITL 4.1 ms``: for a panel's one line;
        "" while the study has nothing to learn from (nothing to say yet)."""
        tput = self.throughput_interval()
        if tput is not None and self.itl_ms is not None:
            return (
                f"next run ≈ {self.output_throughput:,.0f} tok/s ({tput[0]:,.0f}–{tput[1]:,.0f})"
                f" · ITL {self.itl_ms:.1f} ms" + (" · GPU table prior" if self.source else "")
            )
        return "" if self.reason == NO_TRIALS else "next run: unknown until run"

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the trial's ``prediction``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Forecast:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def forecast(trials: Iterable[Any], candidate: Any, prior: Prior | None = None) -> Forecast:
    """The forecast of ``candidate`` (a trial not yet measured) from ``trials`` (its study's).

    Only finished trials of the candidate's own context calibrate; the candidate itself,
    if among them, is left out. With fewer than :data:`MIN_TRIALS` of them, a ``prior``
    (the GPU table's, :mod:`tuner.perfmodel.prior`) scaled by those there are forecasts.
    """
    mine = trial_parts(candidate)
    if mine is None:
        return Forecast(
            reason="the model describes closed-loop runs of random prompts of one length; "
            "this workload is a rate, a dataset, sessions or varied lengths"
        )
    point, parts = mine
    context = context_text(parts)
    usable: list[tuple[Observation, Any]] = []
    for trial in trials:
        if trial.id == candidate.id:
            continue
        obs = observation_of_trial(trial)
        if obs is not None:
            usable.append((obs, trial))
    group = [o for o, _ in usable if o.context == context]
    if len(group) < MIN_TRIALS:
        if prior is not None:
            from tuner.perfmodel.prior import scaled

            tput, itl, band = scaled(prior, point, group)
            return Forecast(tput, itl, band, band, len(group), source=prior.source)
        return Forecast(trials=len(group), reason=_why_not(group, usable, parts))
    from tuner.perfmodel.fit import calibrate

    model = calibrate(group)
    pred = model.predict(point)
    return Forecast(
        pred.output_throughput, pred.itl_ms, pred.throughput_band, pred.itl_band, len(group)
    )


def latest_measured(trials: Sequence[Any]) -> Any | None:
    """The study's latest measured trial: the node (platform, vLLM release, GPUs) a forecast
    of the next run is made for (None: nothing measured yet)."""
    ran = [t for t in trials if t.platform is not None and t.results]
    return max(ran, key=lambda t: t.finished_at or t.created_at) if ran else None


def forecast_record(
    trials: Iterable[Any], candidate: Any, prior: Prior | None = None
) -> dict[str, Any]:
    """:func:`forecast`'s stored form. A forecast must never stop a run: whatever goes wrong
    in the model is recorded as its reason (shown on every face) instead of raised."""
    try:
        return forecast(trials, candidate, prior).to_dict()
    except Exception as exc:  # recorded on the trial, never lost
        return Forecast(reason=f"the model failed: {type(exc).__name__}: {exc}").to_dict()


def _why_not(
    group: Sequence[Observation], usable: Sequence[tuple[Observation, Any]], parts: dict[str, Any]
) -> str:
    if group:
        return (
            f"{len(group)} measured trial(s) like it; the model needs {MIN_TRIALS} "
            f"(it fits three step costs)"
        )
    if not usable:
        return NO_TRIALS
    latest = usable[-1][1]
    theirs = trial_parts(latest)
    differ = _differences(parts, theirs[1]) if theirs is not None else []
    named = ", ".join(differ[:4]) or "its context"
    return (
        f"{named} differ(s) from every measured trial of the study; the model knows only {_KNOWN}"
    )


def _differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """The names of what differs between two contexts: knobs, variables, workload fields."""
    out: list[str] = []
    for part in ("model", "platform", "vllm"):
        if mine.get(part) != theirs.get(part):
            out.append({"vllm": "the vLLM release"}.get(part, f"the {part}"))
    for part in ("engine", "env", "workload"):
        a, b = mine.get(part) or {}, theirs.get(part) or {}
        for key in sorted(set(a) | set(b)):
            if key not in MODELLED_ENGINE_KEYS and a.get(key) != b.get(key):
                out.append(key if part != "workload" else key.replace("_", "-"))
    return out


@dataclass(frozen=True)
class ForecastScore:
    """A stored forecast against what the trial then measured.

    Attributes:
        forecast: The stored forecast (known).
        output_throughput: Measured output tokens per second.
        itl_ms: Measured engine mean ITL (None: the engine's histogram was not read).
    """

    forecast: Forecast
    output_throughput: float
    itl_ms: float | None

    @property
    def throughput_error(self) -> float:
        assert self.forecast.output_throughput is not None
        return self.forecast.output_throughput / self.output_throughput - 1

    @property
    def itl_error(self) -> float | None:
        if self.itl_ms is None or self.forecast.itl_ms is None or self.itl_ms <= 0:
            return None
        return self.forecast.itl_ms / self.itl_ms - 1

    @property
    def inside(self) -> bool:
        """Both measured figures inside their stated 80 % intervals."""
        tput, itl = self.forecast.throughput_interval(), self.forecast.itl_interval()
        ok = tput is not None and tput[0] <= self.output_throughput <= tput[1]
        if self.itl_ms is not None and itl is not None:
            ok = ok and itl[0] <= self.itl_ms <= itl[1]
        return ok

    def describe(self) -> str:
        """``model said ~2,340 tok/s (1,500–3,200): measured 2,100 (+11 %), inside``."""
        f = self.forecast
        tput = f.throughput_interval()
        assert tput is not None
        where = (
            "inside its 80 % interval"
            if self.inside
            else "OUTSIDE its 80 % interval (the interval widens with this trial)"
        )
        itl = ""
        if self.itl_error is not None and self.itl_ms is not None:
            itl = f"; engine ITL said ~{f.itl_ms:.2f} ms, measured {self.itl_ms:.2f}"
        return (
            f"model said ~{f.output_throughput:,.0f} tok/s ({tput[0]:,.0f}–{tput[1]:,.0f}), "
            f"measured {self.output_throughput:,.0f} (off {self.throughput_error:+.0%}){itl}: "
            f"{where}"
        )


def score_of(trial: Any) -> ForecastScore | None:
    """A measured trial's stored forecast against its figures (None: no known forecast, or
    not measured)."""
    stored = getattr(trial, "prediction", None)
    tput = (trial.results or {}).get("output_throughput")
    if not stored or not isinstance(tput, int | float) or not math.isfinite(tput) or tput <= 0:
        return None
    found = Forecast.from_dict(stored)
    if not found.known:
        return None
    itl = (trial.server or {}).get("mean_itl_ms")
    return ForecastScore(found, float(tput), float(itl) if isinstance(itl, int | float) else None)


def record_of(trials: Iterable[Any]) -> dict[str, Any]:
    """The study's record: how its stored forecasts compared with what was measured."""
    scores = [s for t in trials if (s := score_of(t)) is not None]
    if not scores:
        return {"forecasts": 0}
    itl = [abs(e) for s in scores if (e := s.itl_error) is not None]
    return {
        "forecasts": len(scores),
        "median_abs_throughput_error": statistics.median(abs(s.throughput_error) for s in scores),
        "median_abs_itl_error": statistics.median(itl) if itl else None,
        "inside": sum(s.inside for s in scores) / len(scores),
    }


def record_text(record: Mapping[str, Any]) -> str:
    """:func:`record_of`'s one line, as ``tunelab model`` and the report print it."""
    n = record.get("forecasts", 0)
    if not n:
        return "no forecast was stored before a run of this study yet"
    itl = record.get("median_abs_itl_error")
    itl_text = f", ITL {itl:.1%}" if itl is not None else ""
    return (
        f"forecasts made before each run: {n}; median |error| throughput "
        f"{record['median_abs_throughput_error']:.1%}{itl_text}; {record['inside']:.0%} of "
        "runs inside their stated 80 % intervals"
    )
