"""The report as Markdown, for pasting into a pull request, a chat or a ticket.

Tables only (no figures): the HTML page carries the plots. Every text from
outside tunelab (study and knob names, knob values, failure reasons, guard
notes) goes through :func:`_md`: one clean line (:mod:`tuner.foreign_text`),
HTML-significant characters as entities (a renderer that passes raw HTML
through, as GitHub's and many chat tools' do, must not get a ``<img
onerror=...>`` or a ``<script>``) and Markdown's inline control characters
backslash-escaped, so a value can neither break a table nor become a link,
an image, emphasis or math. The launch script goes into a code fence longer
than any backtick run inside it, so it cannot close the fence.
"""

from __future__ import annotations

import re

from tuner.foreign_text import clean, one_line
from tuner.profiles.families import LABELS
from tuner.report.data import ReportData, largest_ops, shown_families
from tuner.studies.stats import format_relative

# Markdown's inline syntax (CommonMark + GFM tables, strikethrough, autolinks,
# GitHub math): each is backslash-escaped, which CommonMark defines for any
# ASCII punctuation, so the reader still sees the character itself.
# An underscore inside a word (VLLM_USE_V1) cannot open emphasis: left as it is.
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~$]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _md(value: object) -> str:
    """Foreign ``value`` as inline Markdown text that shows exactly that text."""
    text = _MD_SPECIAL.sub(r"\\\1", one_line(value))
    return "".join(_HTML.get(ch, ch) for ch in text)


def _code(value: object) -> str:
    """Foreign ``value`` as an inline code span: no backslash escapes work inside one."""
    return "`" + one_line(value).replace("`", "'").replace("|", "\\|") + "`"


def _fence(script: str) -> list[str]:
    """``script`` in a bash code fence that no backtick run inside it can close."""
    text = clean(script).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return [f"{ticks}bash", text, ticks]


def _num(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _guard_lines(data: ReportData) -> list[str]:
    """``## Output drift``: each guarded trial's verdict against the baseline, and the A/B's line."""
    if not data.guarded:
        return []
    lines = [
        "",
        "## Output drift",
        "",
        "Greedy probes after each measured run, on the same engine, compared with the "
        "baseline ★: same (bit-identical), close (same tokens, small logprob drift), "
        "drifted (answers changed).",
        "",
    ]
    if data.ab_guard is not None:
        lines += [f"A/B {_md(data.ab_guard.summary())}", ""]
    lines += ["| trial | verdict | what the guard saw |", "|---|---|---|"]
    for row in data.rows:
        g = row.guard
        if g is not None and g.verdict is not None:
            lines.append(
                f"| {_md(row.trial.short_id)} {_md(row.role)} | {_md(g.label())} | "
                f"{_md(g.describe())} |"
            )
    return lines


def _explain_lines(data: ReportData) -> list[str]:
    """``## Why B is faster (profile)``: the core's sentence and its table by kernel family.

    Without an explanation (an arm's profile failed) the sentence alone: it names why.
    """
    found = data.ab.explanation if data.ab is not None else None
    if found is None:
        return []
    lines = ["", "## Why B is faster (profile)", "", f"**{_md(found.summary())}**"]
    ex = found.explanation
    if ex is None:
        return lines
    lines += [
        "",
        "Milliseconds per output token (per engine step in brackets), each profile scaled to "
        "its launch's measured time; unexplained: what no named family accounts for (other "
        "ops, and what the families do not add up to).",
        "",
        "| family | A | B | B − A | largest ops |",
        "|---|---:|---:|---:|---|",
    ]
    for r in shown_families(ex):
        ops = "; ".join(
            f"{arm}: " + ", ".join(_md(n) for n in names)  # not a code span: no raw markup at all
            for arm, record in (("A", found.a), ("B", found.b))
            if (names := largest_ops(record, r.family))
        )
        lines.append(
            f"| {_md(LABELS[r.family])} | {r.a_ms:.3f} ({r.a_step_ms:.3f}) | "
            f"{r.b_ms:.3f} ({r.b_step_ms:.3f}) | {r.delta_ms:+.3f} | {ops or '—'} |"
        )
    basis = "measured" if ex.measured else "in the profiles"
    lines += [
        f"| unexplained | — | — | {ex.unexplained_ms:+.3f} | |",
        f"| B − A {basis} | — | — | {ex.total_ms:+.3f} | |",
        "",
    ]
    lines += [
        f"- {arm}: {_md(record.describe())}"
        for arm, record in (("A", found.a), ("B", found.b))
        if record is not None
    ]
    return lines


def _sweep_lines(data: ReportData) -> list[str]:
    """Each swept knob: its values, the objective's mean and the samples behind it."""
    lines: list[str] = []
    for curve in data.sweeps:
        lines += [
            "",
            f"## Sweep: {_md(curve.knob)}",
            "",
            f"| {_md(curve.knob)} | mean {_md(curve.objective)} | n |",
            "|---|---:|---:|",
        ]
        for value, mean, samples in zip(curve.values, curve.means, curve.samples, strict=True):
            lines.append(f"| {_md(value)} | {_num(mean)} | {len(samples)} |")
    return lines


def _capacity_lines(data: ReportData) -> list[str]:
    """Each capacity launch's answer, its probes (load, ✓/✗, the SLO's figures) under it."""
    if not data.capacity:
        return []
    lines = ["", "## Capacity", ""]
    for step in data.capacity:
        lines.append(f"- {_md(step.summary())}")
        lines.extend(f"  - {_md(p.trial.short_id)} {_md(p.line())}" for p in step.probes)
    return lines


def _forecast_lines(data: ReportData) -> list[str]:
    """The study model's forecasts made before each run, against what was measured."""
    if not data.forecasts:
        return []
    lines = ["", "## Forecast vs measured", "", _md(data.forecast_record), "",
             "| trial | forecast tok/s | 80 % interval | measured | off | inside |",
             "|---|---:|---|---:|---:|---|"]  # fmt: skip
    for p in data.forecasts:
        lines.append(
            f"| {_md(p.label)} | {p.predicted:,.0f} | {p.low:,.0f}–{p.high:,.0f} | "
            f"{p.measured:,.0f} | {p.predicted / p.measured - 1:+.0%} | "
            f"{'yes' if p.inside else '**no**'} |"
        )
    return lines


def render_markdown(data: ReportData) -> str:
    """The whole Markdown report."""
    lines = [
        f"# tunelab report — {_md(data.study)}",
        "",
        f"- vLLM: {_md(', '.join(data.vllm_versions) or 'unknown')} "
        f"({_md(', '.join(data.platforms) or 'unknown')}); GPUs: "
        f"{_md(', '.join(data.gpu_names) or 'none recorded')}; host: {_md(data.host)}",
        f"- objective: {_code(data.objective)}; trials: "
        + ", ".join(f"{n} {s}" for s, n in sorted(data.counts.items())),
        "",
        "## Trials",
        "",
        "| trial | status | vs baseline | out tok/s | p99 TTFT ms | p99 ITL ms | notes |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for row in data.rows:
        t = row.trial
        changes = "; ".join(
            f"{_md(c.key)}: {_md(c.baseline)} → {_md(c.value)}" for c in row.changes
        )
        if row.probe is not None:
            changes = "capacity probe: judged by its SLO, not against the baseline"
        changes = changes or ("★ baseline" if row.is_baseline else "same config")
        notes = row.notes
        lines.append(
            f"| {_md(t.short_id)} {_md(row.role)} | {_md(t.status)} | {changes} | "
            f"{_num(row.metrics.get('output_throughput'))} | "
            f"{_num(row.metrics.get('p99_ttft_ms'))} | {_num(row.metrics.get('p99_itl_ms'))} | "
            f"{_md('; '.join(notes))} |"
        )
    if data.ab is not None:
        lines += [
            "",
            "## A/B verdict",
            "",
            f"**{_md(data.ab.summary())}**",
            "",
            *(
                [f"A/B {_md(data.ab_guard.summary())}", ""]
                if data.ab_guard and data.guarded
                else []
            ),
            "| metric | A mean | B mean | B vs A | n A/B | verdict |",
            "|---|---:|---:|---|---|---|",
        ]
        for r in data.ab.rows:
            lines.append(
                f"| {_md(r.metric)} | {_num(r.a.mean)} | {_num(r.b.mean)} | "
                f"{_md(format_relative(r))} | {r.a.n}/{r.b.n} | {_md(r.shown_verdict)} |"
            )
    lines += _explain_lines(data)
    lines += _capacity_lines(data)
    lines += _sweep_lines(data)
    lines += _forecast_lines(data)
    sampled = sum(1 for r in data.rows if r.timelines)
    if sampled:
        lines += [
            "",
            f"GPU telemetry timelines of {sampled} trial(s) (power, GFX activity, VRAM per GPU) "
            "are in report.html.",
        ]
    lines += _guard_lines(data)
    lines += ["", "## Winner", ""]
    if data.chosen is None:
        lines.append(f"No trial chosen: {_md(data.why_chosen)}")
    else:
        lines.append(f"Trial {_code(data.chosen.id)}: {_md(data.why_chosen)}")
        if data.launch_script:
            lines += ["", *_fence(data.launch_script)]
        elif data.launch_note:
            lines += ["", f"Launch command {_md(data.launch_note)}"]
    return "\n".join(lines) + "\n"
