"""The live view of a run: stage, progress, rolling figures, engine log tail.

Stages are the trial runner's (starting → ready, with the attention backend
vLLM really chose → warm-up → measuring → done/failed); the screen forwards
each event here. The log is a bounded RichLog, so a chatty engine costs a
fixed amount of memory.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ProgressBar, RichLog, Static

STAGES = ("starting", "ready", "warm-up", "measuring", "done")
LOG_LINES = 500


def stage_line(stage: str, backend: str | None, detail: str = "") -> Text:
    """`starting → ready (TRITON_ATTN) → warm-up → measuring` with the current one lit."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if stage in ("failed", "stopped", "skipped"):
        out.append(stage, style="bold red")
        if detail:
            out.append(f": {detail}")
        return out
    current = STAGES.index(stage) if stage in STAGES else -1
    for i, name in enumerate(STAGES[:-1]):
        if i:
            out.append(" → ", style="dim")
        label = name
        if name == "ready" and backend:
            label = f"ready ({backend})"
        style = "bold reverse" if i == current else ("green" if i < current else "dim")
        out.append(label, style=style)
    if stage == "done":
        out.append("  ✔ done", style="bold green")
    if detail:
        out.append(f"  {detail}", style="dim")
    return out


def figures_line(
    tok_s: float | None, ttft: float | None, itl: float | None, done: int, total: int | None
) -> Text:
    """Rolling tokens/s, p50 TTFT and ITL, requests done."""

    def ms(v: float | None) -> str:
        return "–" if v is None else f"{v:.1f} ms"

    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"{tok_s or 0:.0f} tok/s", style="bold")
    out.append(f"  TTFT {ms(ttft)}  ITL {ms(itl)}  ")
    out.append(f"{done}/{total if total is not None else '?'} req", style="dim")
    return out


class RunPanel(Vertical):
    """What the background run is doing right now."""

    def compose(self) -> ComposeResult:
        yield Static(
            Text("Idle. r: run · a: A/B vs baseline · w: sweep", style="dim"), id="run-stage"
        )
        # Hidden while idle: an indeterminate bar animates, which would cost idle CPU.
        bar = ProgressBar(total=100, show_eta=False, id="run-progress")
        bar.display = False
        yield bar
        yield Static("", id="run-figures")
        yield RichLog(max_lines=LOG_LINES, wrap=False, markup=False, id="run-log")

    def on_mount(self) -> None:
        self.border_title = "Run"

    def begin(self, title: str) -> None:
        """A new job: clear figures and log, title it."""
        self.border_title = f"Run · {title}"
        self.query_one("#run-figures", Static).update("")
        self.query_one("#run-log", RichLog).clear()
        bar = self.query_one("#run-progress", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True
        self.stage("starting", None)

    def end(self) -> None:
        """The job ended: stop the bar's animation (it stays hidden until the next job)."""
        bar = self.query_one("#run-progress", ProgressBar)
        if bar.total is None:
            bar.update(total=1, progress=0)
        bar.display = False

    def stage(self, stage: str, backend: str | None, detail: str = "") -> None:
        self.query_one("#run-stage", Static).update(stage_line(stage, backend, detail))

    def progress(self, done: int, total: int | None) -> None:
        self.query_one("#run-progress", ProgressBar).update(total=total, progress=done)

    def figures(
        self,
        tok_s: float | None,
        ttft: float | None,
        itl: float | None,
        done: int,
        total: int | None,
    ) -> None:
        self.query_one("#run-figures", Static).update(figures_line(tok_s, ttft, itl, done, total))

    def note(self, text: str, highlight: str | None = None, style: str = "bold") -> None:
        """A summary under the stage (the result, or an A/B verdict), wrapped to at most 3 lines."""
        out = Text(text)
        if highlight:
            out.highlight_words([highlight], style=style)
        self.query_one("#run-figures", Static).update(out)

    def log(self, line: str) -> None:
        self.query_one("#run-log", RichLog).write(Text(line.rstrip("\n")))
