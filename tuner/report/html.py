"""The report as one self-contained HTML page: inline CSS and SVG, no script, no network.

Every string that did not come from tunelab itself (study and model names,
knob values, failure reasons, log-derived text) goes through :func:`_e`:
:func:`tuner.foreign_text.clean` (no control characters; bidi controls, which
would reorder what the reader sees in the launch command, shown as
``<U+202E>``), then :func:`html.escape`, so a hostile value in the store
cannot inject markup.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable

from tuner.foreign_text import clean
from tuner.profiles.explain import Explanation
from tuner.profiles.families import LABELS, OTHER
from tuner.report import plots
from tuner.report.data import ReportData, TrialRow, largest_ops, shown_families
from tuner.studies.ab_explain import ArmsExplanation
from tuner.studies.stats import format_relative

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:72em;
padding:0 1em;color:#1f2328}
h1{font-size:1.6em}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #d0d7de;padding:.25em .55em;text-align:right;vertical-align:top}
th{background:#f6f8fa}td.l,th.l{text-align:left}
tr.base td{background:#fff8c5}.warn{color:#9a6700}.bad{color:#cf222e}.good{color:#1a7f37}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#f6f8fa;padding:.8em;overflow-x:auto}
.fig{margin:.6em 0}.muted{color:#656d76}
"""


def _e(value: object) -> str:
    """Foreign ``value`` as HTML text (or attribute value) that shows exactly that text."""
    return html.escape(clean(value), quote=True)


def _num(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _table(head: Iterable[str], rows: Iterable[Iterable[str]], left: int = 1) -> str:
    cols = list(head)
    out = ["<table>"]
    if any(cols):
        out.append("<tr>")
        out += [f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(cols)]
        out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _cell(text: str, left: bool = False, cls: str = "") -> str:
    classes = " ".join(c for c in ("l" if left else "", cls) if c)
    return f'<td class="{classes}">{text}</td>' if classes else f"<td>{text}</td>"


def _trial_rows(data: ReportData) -> str:
    head = [
        "trial",
        "status",
        "vs baseline",
        "outputs",
        "out tok/s",
        "p99 TTFT ms",
        "p99 ITL ms",
        "p99 E2E ms",
        "peak VRAM GiB",
        "tok/J",
        "notes",
    ]
    body = []
    for row in data.rows:
        t = row.trial
        vram = row.telemetry.get("peak_vram_bytes")
        notes = row.notes
        changes = "<br>".join(
            f"<code>{_e(c.key)}</code>: {_e(c.baseline)} → {_e(c.value)}" for c in row.changes
        ) or ("★ baseline" if row.is_baseline else "same config")
        if row.probe is not None:
            changes = "capacity probe: judged by its SLO, not against the baseline"
        cells = [
            _cell(f"<code>{_e(t.short_id)}</code> {_e(row.role)}", left=True),
            _cell(_e(t.status), left=True, cls="bad" if t.status.value == "failed" else ""),
            _cell(changes, left=True),
            _guard_cell(row),
            _cell(_num(row.metrics.get("output_throughput"))),
            _cell(_num(row.metrics.get("p99_ttft_ms"))),
            _cell(_num(row.metrics.get("p99_itl_ms"))),
            _cell(_num(row.metrics.get("p99_e2el_ms"))),
            _cell(_num(vram / 2**30 if vram is not None else None, 3)),
            _cell(_num(row.telemetry.get("tokens_per_joule"), 3)),
            _cell("<br>".join(_e(n) for n in notes), left=True, cls="warn" if notes else ""),
        ]
        body.append(cells)
    return _table(head, body, left=4)


# Verdict label -> CSS class: drift is an error, "close" worth a look, "same" fine.
_GUARD_CLASS = {"same": "good", "close": "warn", "drifted": "bad", "unknown": "warn"}


def _guard_cell(row: TrialRow) -> str:
    g = row.guard
    if g is None or g.verdict is None:
        return _cell("—", left=True, cls="muted")
    label = g.label()
    return (
        f'<td class="l {_GUARD_CLASS.get(label, "")}" title="{_e(g.describe())}">{_e(label)}</td>'
    )


def _guard_section(data: ReportData) -> str:
    """Per trial: the guard's verdict against the baseline and its figures; the A/B's line."""
    if not data.guarded:
        return (
            "<h2>Output drift</h2><p class='muted'>Not recorded: no trial of this study ran "
            "the output-drift guard (run with the guard off, or stored before it existed).</p>"
        )
    head = ["trial", "verdict", "match", "first divergence", "mean |Δlogprob|", "guard s", "what"]
    body = []
    for row in data.rows:
        g = row.guard
        if g is None or g.verdict is None:
            continue
        v = None if g.is_baseline else g.verdict
        match = (
            "—" if v is None or not v.diffs else f"{len(v.diffs) - len(v.diverged)}/{len(v.diffs)}"
        )
        first = None if v is None else v.first_divergence
        label = g.label()
        body.append(
            [
                _cell(f"<code>{_e(row.trial.short_id)}</code> {_e(row.role)}", left=True),
                _cell(_e(label), left=True, cls=_GUARD_CLASS.get(label, "")),
                _cell(match),
                _cell("—" if first is None else f"token {first}"),
                _cell(_num(None if v is None else v.mean_abs_dlogprob, 3)),
                _cell(_num(row.guard_seconds, 3)),
                _cell(_e(g.describe()), left=True),
            ]
        )
    ab_line = (
        f"<p><b>A/B {_e(data.ab_guard.summary())}</b></p>" if data.ab_guard is not None else ""
    )
    return (
        "<h2>Output drift</h2><p>Greedy probes after each measured run, on the same engine, "
        "compared with the baseline ★: <b>same</b> (bit-identical), <b>close</b> (same tokens, "
        "logprobs within the threshold), <b>drifted</b> (answers changed).</p>"
        + ab_line
        + _table(head, body, left=2)
    )


def _ab_section(data: ReportData) -> str:
    ab = data.ab
    if ab is None:
        return ""
    head = ["metric", "A mean", "B mean", "B vs A", "n A/B", "verdict"]
    body = [
        [
            _cell(f"<code>{_e(r.metric)}</code>", left=True),
            _cell(_num(r.a.mean)),
            _cell(_num(r.b.mean)),
            _cell(_e(format_relative(r))),
            _cell(f"{r.a.n}/{r.b.n}"),
            _cell(_e(r.shown_verdict), left=True),
        ]
        for r in ab.rows
    ]
    extra = "".join(f'<p class="warn">{_e(n)}</p>' for n in [*ab.failures, *ab.notes])
    return (
        "<h2>A/B verdict</h2>"
        f"<p><b>{_e(ab.summary())}</b></p>"
        f'<div class="fig">{plots.forest(ab)}</div>' + _table(head, body) + extra
    )


def _explain_section(data: ReportData) -> str:
    """Why B is faster: the core's sentence, its chart and table, each arm's profile line.

    Without an explanation (an arm's profile failed or found no tokens) only the
    sentence, which names why: a chart of half the arms would explain nothing.
    """
    found = data.ab.explanation if data.ab is not None else None
    if found is None:
        return ""
    out = ["<h2>Why B is faster (profile)</h2>", f"<p><b>{_e(found.summary())}</b></p>"]
    ex = found.explanation
    if ex is None:
        return "".join(out)
    out.append(
        "<p>Each arm's first launch was profiled after its measured run, at the workload's "
        "load. Milliseconds per output token, per engine step in brackets, each profile "
        "scaled to its launch's measured time; <i>unexplained</i> is the difference no named "
        "family accounts for (other ops, and what the families do not add up to).</p>"
    )
    out.append(f'<div class="fig">{plots.explanation(ex)}</div>')
    out.append(_explain_table(found, ex))
    for arm, record in (("A", found.a), ("B", found.b)):
        if record is not None:
            out.append(f"<p class='muted'>{arm}: {_e(record.describe())}</p>")
    return "".join(out)


def _explain_table(found: ArmsExplanation, ex: Explanation) -> str:
    """Per family A, B and B − A (ms per output token), then the unexplained rest and the total."""
    head = ["family", "A", "B", "B − A", "largest ops"]
    body = []
    for r in shown_families(ex):
        cls = "" if r.family == OTHER else ("good" if r.delta_ms < 0 else "bad")
        body.append(
            [
                _cell(_e(LABELS[r.family]), left=True),
                _cell(f"{r.a_ms:.3f} ({r.a_step_ms:.3f})"),
                _cell(f"{r.b_ms:.3f} ({r.b_step_ms:.3f})"),
                _cell(f"{r.delta_ms:+.3f}", cls=cls),
                _cell(_largest(found, r.family), left=True),
            ]
        )
    basis = "measured" if ex.measured else "in the profiles"
    for label, value in (("unexplained", ex.unexplained_ms), (f"B − A {basis}", ex.total_ms)):
        body.append(
            [_cell(_e(label), left=True), _cell("—"), _cell("—"), _cell(f"{value:+.3f}"), _cell("")]
        )
    return _table(head, body)


def _largest(found: ArmsExplanation, family: str) -> str:
    """Each arm's largest op names in ``family`` (the trace's own text, escaped)."""
    parts = []
    for arm, record in (("A", found.a), ("B", found.b)):
        names = largest_ops(record, family)
        if names:
            parts.append(f"{arm}: " + ", ".join(f"<code>{_e(n)}</code>" for n in names))
    return "<br>".join(parts) or "—"


def _figures(data: ReportData) -> str:
    parts = []
    for curve in data.sweeps:
        parts.append(f"<h2>Sweep: {_e(curve.knob)}</h2><div class='fig'>{plots.sweep(curve)}</div>")
    for key, points in data.fronts.items():
        if points:
            parts.append(
                f"<h2>Throughput vs {_e(key)}</h2><div class='fig'>{plots.front(points, key)}</div>"
            )
    if data.forecasts:
        parts.append(
            "<h2>Forecast vs measured</h2>"
            f"<p>{_e(data.forecast_record)}</p>"
            f"<div class='fig'>{plots.forecasts(data.forecasts)}</div>"
        )
    tele = plots.telemetry(data.rows)
    parts.append("<h2>Telemetry</h2>")
    parts.append(
        f"<div class='fig'>{tele}</div>"
        if tele
        else "<p class='muted'>No GPU telemetry was sampled for these trials (CPU engine or no "
        "GPU library): power, VRAM and tokens per joule are not available.</p>"
    )
    parts.append(_timelines(data))
    return "".join(parts)


# Timelines drawn per report: each is ~40 KB of SVG; a long search would bloat the page.
MAX_TIMELINES = 40


def _timelines(data: ReportData) -> str:
    """Each sampled trial's GPU timeline, folded (the first one open), newest last."""
    sampled = [r for r in data.rows if r.timelines]
    if not sampled:
        return ""
    shown = sampled[-MAX_TIMELINES:]
    parts = [
        "<h2>Telemetry timelines</h2><p>Power, GFX activity and VRAM of each GPU over the "
        "measured run of each trial, as sampled.</p>"
    ]
    if len(sampled) > len(shown):
        parts.append(
            f"<p class='muted'>The last {len(shown)} of {len(sampled)} sampled trials; "
            "<code>tunelab show TRIAL</code> gives any trial's window.</p>"
        )
    for i, row in enumerate(shown):
        peak = max((p for g in row.timelines for p in g.power_w if p is not None), default=None)
        summary = (
            f"{_e(row.label)} — {len(row.timelines)} GPU(s), "
            f"{len(row.timelines[0].seconds)} samples"
            + (f", peak {peak:.0f} W" if peak is not None else "")
        )
        parts.append(
            f"<details{' open' if i == 0 else ''} class='timeline' id='timeline-{_e(row.trial.id)}'>"
            f"<summary>{summary}</summary><div class='fig'>{plots.timeline(row.timelines)}</div>"
            "</details>"
        )
    return "".join(parts)


def _winner_section(data: ReportData) -> str:
    if data.chosen is None:
        return f"<h2>Winner</h2><p class='muted'>{_e(data.why_chosen)}</p>"
    out = [
        "<h2>Winner</h2>",
        f"<p>Trial <code>{_e(data.chosen.id)}</code>: {_e(data.why_chosen)}</p>",
    ]
    if data.launch_script:
        out.append("<p>Launch command (as exported by <code>tunelab export</code>):</p>")
        out.append(f"<pre>{_e(data.launch_script)}</pre>")
    elif data.launch_note:
        out.append(f"<p class='muted'>Launch command {_e(data.launch_note)}</p>")
    return "".join(out)


def _capacity_section(data: ReportData) -> str:
    """Each capacity launch's answer and its probes (load, ✓/✗, the SLO's figures)."""
    if not data.capacity:
        return ""
    items = []
    for step in data.capacity:
        probes = "".join(
            f"<li><code>{_e(p.trial.short_id)}</code> {_e(p.line())}</li>" for p in step.probes
        )
        items.append(f"<li>{_e(step.summary())}<ul>{probes}</ul></li>")
    return "<h2>Capacity</h2><ul>" + "".join(items) + "</ul>"


def render_html(data: ReportData) -> str:
    """The whole page."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(data.generated_at))
    counts = ", ".join(f"{n} {s}" for s, n in sorted(data.counts.items()))
    node = [
        ("study", data.study),
        ("host", data.host),
        ("vLLM", ", ".join(data.vllm_versions) or "unknown"),
        ("platform", ", ".join(data.platforms) or "unknown"),
        ("GPUs", ", ".join(data.gpu_names) or "none recorded"),
        ("objective", data.objective),
        ("trials", counts or "none"),
        ("made by", f"tunelab {data.tunelab_version}, {when}"),
    ]
    node_rows = [[_cell(_e(k), left=True), _cell(_e(v), left=True)] for k, v in node]
    base = data.baseline
    base_line = (
        f"<p>Baseline ★: trial <code>{_e(base.trial.id)}</code> ({_e(base.how)}); every row "
        "lists the knobs it changes from it.</p>"
        if base
        else "<p class='muted'>No finished trial: nothing to compare with.</p>"
    )
    body = (
        f"<h1>tunelab report — {_e(data.study)}</h1>"
        + _table(["", ""], node_rows, left=2)
        + "<h2>Trials</h2>"
        + base_line
        + _trial_rows(data)
        + _ab_section(data)
        + _explain_section(data)
        + _capacity_section(data)
        + _figures(data)
        + _winner_section(data)
        + _guard_section(data)
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>tunelab report — {_e(data.study)}</title><style>{_CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )
