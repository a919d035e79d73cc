"""The report as Markdown, for pasting into a pull request, a chat or a ticket.

Tables only (no figures): the HTML page carries the plots. Cell text from
outside tunelab has its pipes, backticks and newlines neutralised so a
value cannot break the table.
"""

from __future__ import annotations

from tuner.report.data import ReportData
from tuner.studies.stats import format_relative


def _md(value: object) -> str:
    text = str(value).replace("\r", " ").replace("\n", " ")
    return text.replace("|", "\\|").replace("`", "'")


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
                f"| {row.trial.short_id} {_md(row.role)} | {g.label()} | {_md(g.describe())} |"
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
        f"- objective: `{_md(data.objective)}`; trials: "
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
        changes = changes or ("★ baseline" if row.is_baseline else "same config")
        notes = [*row.mismatches, *([row.delivery] if row.delivery else [])]
        if t.failure_reason:
            notes.append(t.failure_reason)
        lines.append(
            f"| {t.short_id} {_md(row.role)} | {t.status} | {changes} | "
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
                f"| {r.metric} | {_num(r.a.mean)} | {_num(r.b.mean)} | {format_relative(r)} | "
                f"{r.a.n}/{r.b.n} | {r.shown_verdict} |"
            )
    for curve in data.sweeps:
        lines += [
            "",
            f"## Sweep: {_md(curve.knob)}",
            "",
            f"| {_md(curve.knob)} | mean {curve.objective} | n |",
            "|---|---:|---:|",
        ]
        for value, mean, samples in zip(curve.values, curve.means, curve.samples, strict=True):
            lines.append(f"| {_md(value)} | {_num(mean)} | {len(samples)} |")
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
        lines.append(_md(data.why_chosen))
    else:
        lines.append(f"Trial `{data.chosen.id}`: {_md(data.why_chosen)}")
        if data.launch_script:
            lines += ["", "```bash", data.launch_script.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"
