"""The study report: one self-contained HTML page and a Markdown twin, from the store alone.

Engineers share tuning results in pull requests, chats and tickets; a
terminal screen is not shareable. :func:`collect` reads a study's trials
from the store and derives everything the report shows through the same
core functions the CLI and the TUI use (the A/B report, the winner, the
Pareto front, the launch script renderer), so the report can never
disagree with them. :mod:`tuner.report.html` and :mod:`tuner.report.markdown`
only render that data; :mod:`tuner.report.plots` draws its figures.
"""

from __future__ import annotations

from tuner.report.data import ReportData, collect
from tuner.report.write import ReportError, write_report

__all__ = ["ReportData", "ReportError", "collect", "write_report"]
