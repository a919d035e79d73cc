"""The report's figures, drawn by matplotlib as inline SVG.

matplotlib was chosen over plotly because its SVG output is static, small
and needs no JavaScript: the page stays self-contained and opens with no
network access, in a browser or a pull-request preview alike. It is
imported only by the report command (about 0.5 s), never on the CLI's or
the TUI's start-up path.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # no display on a GPU node over SSH
import matplotlib.pyplot as plt

from tuner.foreign_text import one_line
from tuner.profiles.explain import Explanation
from tuner.profiles.families import LABELS, OTHER
from tuner.report.data import (
    ForecastPoint,
    FrontPoint,
    GpuTimeline,
    SweepCurve,
    TrialRow,
    shown_families,
)
from tuner.studies.ab import ABReport
from tuner.studies.stats import Verdict

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Stable ids and no timestamps: the same store gives byte-identical SVG.
matplotlib.rcParams["svg.hashsalt"] = "tunelab"
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["font.size"] = 9
# Labels carry foreign text (knob values, served-model names, study tags): a `$` in
# one must print as a dollar, never be parsed as mathtext (`$x^$` raised ValueError
# and lost the whole report). No label of the report is meant as math.
matplotlib.rcParams["text.parse_math"] = False

_CLIP = 200.0  # percent: the forest plot's half-width
_LABEL_MAX = 60  # characters of a foreign label drawn in a figure (the tables show it whole)
_COLOURS = {
    Verdict.B_BETTER: "#1a7f37",
    Verdict.A_BETTER: "#cf222e",
    Verdict.NO_DIFFERENCE: "#6e7781",
}
# "Why B is faster": B spends less (green) or more (red) in a family; "other ops" and
# the unexplained rest are grey, the latter hatched, as neither names a cause.
_LESS, _MORE, _NEUTRAL = "#1a7f37", "#cf222e", "#8c959f"
# Each bar's SVG group id: "<prefix><family>" (a family key of tuner.profiles.families)
# or "<prefix>unexplained", so a reader's tools (and the tests) can find a family's bar.
EXPLAIN_BAR_ID = "explain-delta-"
UNEXPLAINED = "unexplained"


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    # Drop the XML prolog and DOCTYPE: the SVG is inlined into HTML.
    return text[text.index("<svg") :]


def _t(text: object) -> str:
    """Foreign ``text`` as a figure label: one clean line (tuner.foreign_text), cut to fit."""
    line = one_line(text)
    return line if len(line) <= _LABEL_MAX else line[: _LABEL_MAX - 1] + "…"


def forest(ab: ABReport) -> str:
    """B vs A per metric: the relative change and its interval (better to the right).

    Intervals wider than ±``_CLIP`` % (a few noisy launches give such) are cut at
    the edge and marked with an arrow, so one wild row does not flatten the rest.
    """
    rows = [r for r in ab.rows if r.rel_diff is not None]
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(rows) + 1.0))
    for i, row in enumerate(reversed(rows)):
        sign = -1.0 if row.direction.value == "lower" else 1.0
        colour = _COLOURS[Verdict.NO_DIFFERENCE if row.withheld else row.verdict]
        mid = _clip(sign * 100 * (row.rel_diff or 0.0))
        lo, hi = row.rel_ci_low, row.rel_ci_high
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            ends = sorted((sign * 100 * lo, sign * 100 * hi))
            ax.plot([_clip(e) for e in ends], [i, i], color=colour, linewidth=2)
            for end, marker in ((ends[0], "<"), (ends[1], ">")):
                if abs(end) > _CLIP:
                    ax.plot([_clip(end)], [i], marker, color=colour)
        ax.plot([mid], [i], "o", color=colour)
    ax.axvline(0, color="#444", linewidth=0.8)
    ax.set_xlim(-_CLIP * 1.05, _CLIP * 1.05)
    ax.set_yticks(range(len(rows)), [_t(r.metric) for r in reversed(rows)])
    ax.set_xlabel(f"B vs A, % (right = B better; latencies flipped; cut at ±{_CLIP:.0f} %)")
    ax.set_title(f"A/B: {ab.verdict.value} on {_t(ab.objective)}")
    return _svg(fig)


def _clip(value: float) -> float:
    return max(-_CLIP, min(_CLIP, value))


def sweep(curve: SweepCurve) -> str:
    """The objective over the swept values: every repeat as a dot, the mean as a line."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    xs = range(len(curve.values))
    ax.plot(list(xs), curve.means, "-", color="#0969da", label="mean")
    for x, samples in zip(xs, curve.samples, strict=True):
        ax.plot([x] * len(samples), samples, "o", color="#0969da", alpha=0.45)
    ax.set_xticks(list(xs), [_t(v) for v in curve.values])
    ax.set_xlabel(_t(curve.knob))
    ax.set_ylabel(_t(curve.objective))
    ax.set_title(f"sweep of {_t(curve.knob)}")
    return _svg(fig)


def front(points: Sequence[FrontPoint], latency_key: str) -> str:
    """Throughput against a latency percentile; the Pareto front joined by a line."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    rest = [p for p in points if not p.on_front]
    best = sorted((p for p in points if p.on_front), key=lambda p: p.latency_ms)
    ax.plot([p.latency_ms for p in rest], [p.throughput for p in rest], "o", color="#8c959f")
    ax.plot(
        [p.latency_ms for p in best],
        [p.throughput for p in best],
        "o-",
        color="#bf3989",
        label="Pareto front",
    )
    for p in best:
        ax.annotate(
            _t(p.label),
            (p.latency_ms, p.throughput),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.set_xlabel(f"{_t(latency_key)} (lower is better)")
    ax.set_ylabel("output tok/s (higher is better)")
    ax.legend(loc="best")
    return _svg(fig)


def forecasts(points: Sequence[ForecastPoint]) -> str:
    """Forecast against measured throughput, each forecast's 80 % interval as a bar; on the
    diagonal the model was right, a red point's measurement fell outside its interval."""
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    for inside, colour, name in ((True, "#1a7f37", "inside its 80 % interval"),
                                 (False, "#cf222e", "outside")):  # fmt: skip
        chosen = [p for p in points if p.inside is inside]
        if not chosen:
            continue
        ax.errorbar(
            [p.measured for p in chosen],
            [p.predicted for p in chosen],
            yerr=[[p.predicted - p.low for p in chosen], [p.high - p.predicted for p in chosen]],
            fmt="o",
            color=colour,
            capsize=2,
            label=name,
        )
    top = max(max(p.high for p in points), max(p.measured for p in points)) * 1.05
    ax.plot([0, top], [0, top], "--", color="#8c959f", linewidth=1)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("measured output tok/s")
    ax.set_ylabel("forecast before the run (tok/s)")
    ax.legend(loc="upper left")
    return _svg(fig)


def telemetry(rows: Sequence[TrialRow]) -> str | None:
    """Mean power and tokens per joule per trial, where the GPUs were sampled."""
    sampled = [r for r in rows if r.telemetry.get("mean_power_w") is not None]
    if not sampled:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7.5, 0.35 * len(sampled) + 1.2))
    labels = [_t(r.label) for r in sampled]
    ax1.barh(labels, [r.telemetry["mean_power_w"] or 0.0 for r in sampled], color="#fb8f44")
    ax1.set_xlabel("mean power, W")
    ax2.barh(labels, [r.telemetry.get("tokens_per_joule") or 0.0 for r in sampled], color="#1a7f37")
    ax2.set_xlabel("output tokens per joule")
    ax2.set_yticks([])
    return _svg(fig)


def timeline(gpus: Sequence[GpuTimeline]) -> str:
    """Power, GFX activity and VRAM of each GPU over one trial's measured run (shared time axis)."""
    fig, axes = plt.subplots(3, 1, figsize=(7.5, 4.6), sharex=True)
    panels = (("power, W", "power_w"), ("GFX activity, %", "gfx_pct"), ("VRAM, GiB", "vram_gib"))
    for ax, (label, attr) in zip(axes, panels, strict=True):
        for gpu in gpus:
            values = [math.nan if v is None else v for v in getattr(gpu, attr)]
            ax.plot(gpu.seconds, values, linewidth=1.0, label=f"GPU {gpu.index}")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("seconds into the measured run")
    if 1 < len(gpus) <= 8:
        axes[0].legend(loc="upper right", ncol=min(4, len(gpus)), fontsize=7)
    return _svg(fig)


def explanation(ex: Explanation) -> str:
    """B − A per output token by kernel family, and the part no family explains.

    One horizontal bar per family either arm spent time in, in the core's order
    (largest |B − A| on top), then the unexplained rest (the measured difference
    less the named families: other ops, and time outside the profiled worker),
    hatched so it does not read as a family. Left of zero: B spends less there.
    """
    rows = shown_families(ex)
    keys = [r.family for r in rows] + [UNEXPLAINED]
    values = [r.delta_ms for r in rows] + [ex.unexplained_ms]
    colours = [
        _NEUTRAL if r.family == OTHER else (_LESS if r.delta_ms < 0 else _MORE) for r in rows
    ]
    labels = [LABELS[r.family] for r in rows] + ["unexplained"]
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(keys) + 1.2))
    ys = list(range(len(keys)))[::-1]  # the first row on top
    bars = ax.barh(ys, values, color=[*colours, "white"])
    unexplained = bars[-1]
    unexplained.set_edgecolor(_NEUTRAL)
    unexplained.set_hatch("//")
    for bar, key in zip(bars, keys, strict=True):
        bar.set_gid(f"{EXPLAIN_BAR_ID}{key}")
    ax.bar_label(bars, fmt="%+.3f", padding=3, fontsize=7)
    ax.axvline(0, color="#444", linewidth=0.8)
    ax.set_yticks(ys, labels)
    ax.margins(x=0.15)
    basis = "measured" if ex.measured else "in the profiles"
    ax.set_xlabel("B − A, ms per output token (left of 0: B spends less)")
    ax.set_title(f"B − A {basis}: {ex.total_ms:+.3f} ms per output token, by kernel family")
    return _svg(fig)
