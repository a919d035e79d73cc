"""Rule findings beside the knobs, updated on every edit; errors block Run.

The panel only renders what ``tuner.lab.checks.findings`` returned (the
rules, plus invalid knob text as errors); Run refuses while there is an
error, and ``f`` — offered only while a finding has a fix — applies it (or
lets the user pick one when several have a fix).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from tuner.rules import Finding, Severity

ICONS = {
    Severity.ERROR: ("✖", "bold red"),
    Severity.WARNING: ("▲", "yellow"),
    Severity.ADVICE: ("•", "cyan"),
}


def fix_text(fix: dict[str, object] | None) -> str:
    """``k=v, k2=default`` for a finding's fix."""
    if not fix:
        return ""
    return ", ".join(f"{k}={'default' if v is None else v}" for k, v in fix.items())


def render_findings(findings: Sequence[Finding], empty: str = "") -> Text:
    """One paragraph per finding, errors first, with the fix and its key; ``empty`` when
    there is none (tuner.lab.checks.no_findings_text: what the rules could judge)."""
    if not findings:
        return Text(empty, style="dim")
    out = Text()
    several = sum(1 for f in findings if f.fix) > 1
    for i, finding in enumerate(findings):
        icon, style = ICONS.get(finding.severity, ("?", ""))
        if i:
            out.append("\n")
        out.append(f"{icon} ", style=style)
        out.append(finding.message)
        if finding.fix:
            key = " [f: pick]" if several else " [f]"
            out.append(f"  fix{key}: {fix_text(finding.fix)}", style="bold green")
    return out


class FindingsPanel(Static):
    """The live list of findings for the current config, and the study model's forecast of
    running it (its subtitle while nothing blocks Run)."""

    forecast = ""

    def on_mount(self) -> None:
        self.border_title = "Findings"

    def show_forecast(self, text: str) -> None:
        """The next run's forecast (tuner.lab.study.Study.forecast_next), under the findings."""
        self.forecast = text
        if not self.has_class("-error"):
            self.border_subtitle = text

    def show(self, findings: Sequence[Finding], empty: str = "") -> None:
        """Render ``findings`` (``empty``: the core's sentence for none) and count them in the title."""
        errors = sum(f.severity is Severity.ERROR for f in findings)
        warnings = sum(f.severity is Severity.WARNING for f in findings)
        self.update(render_findings(findings, empty))
        self.set_class(errors > 0, "-error")
        self.border_title = (
            f"Findings · {errors} error{'s' if errors != 1 else ''}, {warnings} warn"
        )
        if not errors:
            self.border_subtitle = self.forecast
        elif any(f.fix for f in findings if f.severity is Severity.ERROR):
            self.border_subtitle = "Run blocked: press f to apply the fix"
        else:
            self.border_subtitle = "Run blocked: change the knob the error names"
