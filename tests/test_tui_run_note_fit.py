"""The Run panel's verdict at 80×24: at most three lines, cut with "…", whole in the event log.

An A/B verdict wider than three lines of the panel was cut by the box's edge
mid-sentence, so its last words read as the first of the event log below
(issue 32's 80×24 walk). The panel now says that the sentence goes on, and the
event log holds it whole.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import RichLog

from tests.support.tui_harness import shown_lines
from tui.widgets.run_panel import NOTE_LINES, RunPanel, fit_lines

VERDICT = (
    "B is faster: output tok/s +23.4 % (95 % CI +10.1 … +36.2 %), 3 runs per arm, "
    "p = 0.01; TTFT p99 −12 % (CI −30 … +4 %: within noise); host noise flagged on "
    "1 of 6 runs (foreign process on GPU 3); B ran CPU_ATTN where TORCH_SDPA was asked"
)


def _words(text: str) -> str:
    return " ".join(text.split())


def test_a_long_text_is_cut_to_its_lines_with_an_ellipsis() -> None:
    console = Console(width=200)
    for width in (20, 36, 57):
        fitted = fit_lines(Text(VERDICT), width, console)
        lines = fitted.plain.split("\n")
        assert len(lines) == NOTE_LINES, (width, lines)
        assert all(len(line) <= width for line in lines)
        assert lines[-1].endswith("…")
        assert VERDICT.startswith(_words(" ".join(lines)).removesuffix("…").rstrip())
    short = Text("B is faster: +23 %")
    assert fit_lines(short, 36, console) is short


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield RunPanel(id="run")


async def test_the_panel_draws_three_lines_and_logs_the_whole_verdict() -> None:
    app = Host()
    async with app.run_test(size=(40, 24)) as pilot:
        panel = app.query_one(RunPanel)
        panel.note(VERDICT, highlight="B is faster")
        await pilot.pause()
        drawn = shown_lines(app.query_one("#run-figures"))
        assert len(drawn) == NOTE_LINES and drawn[-1].endswith("…"), drawn
        assert VERDICT.startswith(_words(" ".join(drawn)).removesuffix("…").rstrip())
        logged = _words(" ".join(s.text for s in app.query_one("#run-log", RichLog).lines))
        assert _words(VERDICT) in logged
