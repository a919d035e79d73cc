"""The live view of a run: stage, job progress, rolling figures, tunelab's own events.

Stages are the trial runner's (starting → ready, with the attention backend
vLLM really chose → warm-up → measuring → done/failed); the screen forwards
each event here. The panel shows the result and tunelab's events (stage
changes with their time, failures); the engine's own output — ~30 lines of
``nanobind: leaked …`` and, after Stop, vLLM's shutdown traceback — goes to
:class:`EngineLog`, one key (`l`) away in the full-width log view, with the
lines written after tunelab asked the engine to stop marked as shutdown
output (issue 13). Both are bounded, so a chatty engine costs a fixed amount
of memory.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text
from textual import on
from textual.app import ComposeResult, RenderResult
from textual.containers import Vertical
from textual.events import Mount
from textual.timer import Timer
from textual.widgets import ProgressBar, RichLog, Static

from tuner import paths
from tuner.engine import effective
from tuner.foreign_text import clean
from tuner.trials import events as ev

STAGES = ("starting", "ready", "warm-up", "measuring", "done")
# A profiled trial's window after its measured run (issue 29): drawn after "measuring"
# only when it happens, so the chain of an unprofiled trial keeps its width at 80 columns.
PROFILING = "profiling"
# Stages whose line counts seconds: no figures move then (the profiler waits for its trace).
CLOCKED = ("starting", "ready", "warm-up", PROFILING)


def _index(stage: str, default: int) -> int:
    """Where ``stage`` stands in the chain; the profiling window comes after measuring."""
    if stage == PROFILING:
        return STAGES.index("measuring") + 1
    return STAGES.index(stage) if stage in STAGES else default


EVENT_LINES = 200
ENGINE_LINES = 20_000


@dataclass(frozen=True)
class LogLine:
    """One engine log line; ``shutdown``: written after tunelab asked the engine to stop."""

    text: str
    shutdown: bool = False
    trial: str | None = None


class EngineLog:
    """The engine output of the current job, in memory, with the log file of each trial."""

    def __init__(self, limit: int = ENGINE_LINES) -> None:
        self.lines: deque[LogLine] = deque(maxlen=limit)
        self.paths: dict[str, Path] = {}
        self.trial: str | None = None
        self.stopping = False

    def clear(self) -> None:
        self.lines.clear()
        self.paths.clear()
        self.trial = None
        self.stopping = False

    def start_trial(self, trial_id: str, path: Path | None) -> None:
        """A new engine start: its lines are live output again, not shutdown."""
        self.trial, self.stopping = trial_id, False
        if path is not None:
            self.paths[trial_id] = path

    def add(self, text: str) -> None:
        self.lines.append(LogLine(text.rstrip("\n"), self.stopping, self.trial))

    @property
    def path(self) -> Path | None:
        """The newest trial's log file."""
        return self.paths.get(self.trial) if self.trial else None

    @property
    def shutdown_count(self) -> int:
        return sum(line.shutdown for line in self.lines)


def stage_line(
    stage: str,
    backend: str | None,
    detail: str = "",
    mismatch: str | None = None,
    width: int | None = None,
) -> Text:
    """`starting → ready (TRITON_ATTN) → warm-up → measuring` with the current one lit.

    ``mismatch`` (what was requested when vLLM used something else) is drawn in
    bold red right after the backend: `ready (CPU_ATTN ≠ requested TORCH_SDPA)`.
    ``width``: the room the line has; when the whole chain does not fit, the
    stages already passed give way (`… → warm-up → measuring`), so the current
    stage is never the part cut off (at 80×24 it was).
    """
    current = min(_index(stage, 0), len(STAGES) - 2)
    line = _stages(stage, backend, detail, mismatch, 0)
    for first in (current - 1, current):  # the stage before the current one, then none
        if width is None or line.cell_len - len(detail) <= width or first < 1:
            continue
        line = _stages(stage, backend, detail, mismatch, first)
    return line


def _stages(stage: str, backend: str | None, detail: str, mismatch: str | None, first: int) -> Text:
    """The stage chain from ``STAGES[first]`` (``…`` standing for those before it)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if stage in ("failed", "stopped", "skipped"):
        out.append(stage, style="bold red")
        if detail:
            out.append(f": {detail}")
        return out
    current = _index(stage, -1)
    if first:
        out.append("… → ", style="dim")
    for i, name in enumerate(STAGES[:-1]):
        if i < first:
            continue
        if i > first:
            out.append(" → ", style="dim")
        style = "bold reverse" if i == current else ("green" if i < current else "dim")
        if name == "ready" and backend:
            out.append(f"ready ({backend}", style=style)
            if mismatch:
                out.append(f" ≠ requested {mismatch}", style="bold red")
            out.append(")", style=style)
        else:
            out.append(name, style=style)
    if stage == PROFILING:
        out.append(" → ", style="dim")
        out.append(PROFILING, style="bold reverse")
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


def clock(seconds: float) -> str:
    """`42 s`, `3:07`, `1:02:03`."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def job_line(
    kind: str, plan: Sequence[str], launch: int, elapsed: float, launch_elapsed: float
) -> Text:
    """`A/B · launch 2 of 6 · arm B1 · 1:12 elapsed · ETA ~3:30` (ETA once a launch finished)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    total = len(plan)
    what = "point" if kind == "sweep" else "launch"
    out.append(f"{'A/B' if kind == 'ab' else kind} · ", style="bold")
    k = max(1, min(launch, total))
    out.append(f"{what} {k} of {total}", style="bold")
    label = plan[k - 1] if launch else plan[0]
    out.append(f" · {'arm ' if kind == 'ab' else ''}{label}")
    out.append(f" · {clock(elapsed)} elapsed", style="dim")
    finished = launch - 1
    if finished >= 1:
        per = (elapsed - launch_elapsed) / finished
        left = max(0.0, per * (total - finished) - launch_elapsed)
        out.append(f" · ETA ~{clock(left)}", style="dim")
    else:
        out.append(" · ETA after the first launch", style="dim")
    return out


NOTE_LINES = 3  # the result or verdict under the stage; the whole text is in the event log


def fit_lines(text: Text, width: int, console: Console, lines: int = NOTE_LINES) -> Text:
    """``text`` wrapped to ``width``, cut to ``lines`` lines ending in "…" when it is longer.

    A verdict cut mid-sentence by the box's edge read as if its last words were
    the event log's first (issue 32 at 80×24); cut here, it says it goes on.
    """
    if width < 2:
        return text
    if text.no_wrap:  # one line per line of the text, each cut on its own
        return Text("\n").join(_cut(line, width) for line in text.split("\n")[:lines])
    wrapped = text.wrap(console, width, overflow="fold")
    if len(wrapped) <= lines:
        return text
    kept = [wrapped[n] for n in range(lines)]
    kept[-1] = _cut(kept[-1], width, always=True)
    return Text("\n").join(kept)


def _cut(line: Text, width: int, *, always: bool = False) -> Text:
    """``line`` ending in "…" within ``width`` cells when longer (``always``: it goes on)."""
    if not always and line.cell_len <= width:
        return line
    out = line.copy()
    out.rstrip()
    out.truncate(width - 1, overflow="crop")
    out.append("…")
    return out


class NoteLines(Static):
    """The Run panel's summary lines: at most NOTE_LINES at any width, cut with "…"."""

    def render(self) -> RenderResult:
        content = self.content
        width = self.content_size.width
        if isinstance(content, Text) and width:
            return fit_lines(content, width, self.app.console)
        return self.visual


class StillProgressBar(ProgressBar):
    """A progress bar without Textual's once-a-second ETA refresh: it shows no ETA, and an
    idle TUI should not wake for it (issue 32's idle CPU)."""

    @on(Mount)
    def _without_eta_clock(self, event: Mount) -> None:
        event.prevent_default()  # ProgressBar.on_mount, which starts that 1 Hz interval
        self.update()


class RunPanel(Vertical):
    """What the background run is doing right now."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine_log = EngineLog()
        self._stage = ""
        self._title = ""
        self._backend: str | None = None
        self._detail = ""
        self._mismatch: str | None = None
        self._started: float | None = None
        self._stage_since = 0.0
        self._stage_launch = 0  # the launch the current stage began in
        self._kind = "run"
        self._plan: tuple[str, ...] = ()
        self._launch = 0
        self._launch_started = 0.0
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(
            Text("Idle. r: run · a: A/B vs baseline · w: sweep · l: engine log", style="dim"),
            id="run-stage",
        )
        yield Static("", id="run-job")
        yield Static("", id="run-slots")
        yield Static("", id="run-effective")
        # Hidden while idle: an indeterminate bar animates, which would cost idle CPU.
        bar = StillProgressBar(total=100, show_eta=False, id="run-progress")
        bar.display = False
        yield bar
        yield NoteLines("", id="run-figures")
        yield RichLog(max_lines=EVENT_LINES, wrap=True, min_width=20, markup=False, id="run-log")

    def on_mount(self) -> None:
        self.border_title = "Run"
        self.query_one("#run-job").display = False
        self.query_one("#run-slots").display = False
        self.query_one("#run-effective").display = False

    def show_idle(self, study: str, lines: Sequence[str]) -> None:
        """Idle: the study's baseline and last result (earlier sessions'), under the key hint."""
        if self._started is not None or self._title:
            return  # a job has used the panel since: its lines stay
        self.border_title = f"Run · study {study}"
        # One line each, cut with "…": the baseline and the last result both stay in view.
        shown = Text(clean("\n".join(lines)), no_wrap=True, overflow="ellipsis")
        self.query_one("#run-figures", Static).update(shown)

    def begin(self, title: str, plan: Sequence[str] = (), kind: str = "run") -> None:
        """A new job: clear figures, events and the engine log; title it.

        Args:
            title: The job's title.
            plan: One label per engine launch (A/B arms ``A1 B1 B2 A2 …``, sweep points);
                empty for a single run.
            kind: run, ab or sweep.
        """
        self._title = title
        self.border_title = f"Run · {title}"
        self.border_subtitle = "l: engine log"
        self.query_one("#run-figures", Static).update("")
        self.query_one("#run-log", RichLog).clear()
        self.show_effective(None)
        self.engine_log.clear()
        self._kind, self._plan, self._launch = kind, tuple(plan), 0
        self._started = self._launch_started = time.monotonic()
        self.query_one("#run-job").display = len(self._plan) > 1
        self.query_one("#run-slots").display = False
        self._stage = ""
        self.event(f"{title}: queued to run")
        # The line counts from now; "starting the engine" is logged when the trial's own
        # start event comes (with its time, for a replayed one).
        self.stage("starting", None, log=False)
        if self._timer is None:
            self._timer = self.set_interval(1.0, self._tick)
        else:
            self._timer.resume()

    def end(self, outcome: str = "") -> None:
        """The job ended (``outcome``: done, failed or stopped, added to the title so it
        says how the job ended): stop the clock and the bar's animation (hidden until the next job)."""
        if outcome and self._title:
            self.border_title = f"Run · {self._title} · {outcome}"
        bar = self.query_one("#run-progress", ProgressBar)
        if bar.total is None:
            bar.update(total=1, progress=0)
        bar.display = False
        if self._timer is not None:
            self._timer.pause()
        self._tick()
        self._started = None

    def trial_event(self, event: Any, at: float | None = None) -> None:
        """Context from a trial event: which launch, the log file, shutdown, what vLLM really ran.

        ``at`` is when the event happened (wall clock), for one replayed from a
        detached job; None: now.
        """
        if isinstance(event, ev.TrialStage):
            if event.stage == "starting":
                self._launch += 1
                self._launch_started = _monotonic(at)
                if self._launch == 1 and self._started is not None:
                    # A replay: the job began before this TUI followed it.
                    self._started = min(self._started, self._launch_started)
                self._mismatch = None
                self.engine_log.start_trial(event.trial_id, _log_path(event.trial_id))
            elif event.stage == "stopping":
                self.engine_log.stopping = True
                self.event(
                    "stopping the engine (its output from here on is marked shutdown)", at=at
                )
        elif isinstance(event, ev.TrialBackend):
            if event.requested and event.actual and event.requested != event.actual:
                self._mismatch = event.requested
        elif isinstance(event, ev.TrialDone | ev.TrialFailed):
            if event.trial.log_path:
                self.engine_log.paths[event.trial.id] = Path(event.trial.log_path)
            self.show_effective(effective.of_trial(event.trial.effective))
            if untuned := event.trial.untuned_shapes.summary():
                # Issue 29: the core's sentence, and the command that exports them.
                self.event(
                    f"AITER: {untuned} (tunelab export {event.trial.short_id} --aiter-untuned)",
                    style="yellow",
                    at=at,
                )

    def study_status(self, status: ev.StudyStatus) -> None:
        """Every slot of a study running trials side by side: which trial, which stage (issue 15).

        The single stage line follows the newest event; with two or more slots
        this block lists all of them, as the core's tracker reports them.
        """
        block = self.query_one("#run-slots", Static)
        block.display = len(status.slots) > 1
        if block.display:
            block.update(slots_text(status))

    def show_effective(self, ran: effective.EffectiveConfig | None) -> None:
        """Every knob vLLM ran differently from the request, in bold red (B5; None clears).

        The comparison is the core's (``tuner.engine.effective``, read from vLLM's
        start-up log); this only draws it, and logs each mismatch as an event.
        """
        line = self.query_one("#run-effective", Static)
        mismatches = ran.mismatches if ran is not None else ()
        line.display = bool(mismatches)
        if not mismatches:
            line.update("")
            return
        out = Text("⚠ vLLM ran ", style="bold red")
        for i, m in enumerate(mismatches):
            if i:
                out.append("; ", style="red")
            out.append(f"{m.knob}={m.effective}", style="bold red")
            out.append(f" ≠ requested {m.requested}", style="red")
        line.update(out)
        for m in mismatches:
            self.event(f"≠ {m.message()}", style="bold red")

    def stage(
        self,
        stage: str,
        backend: str | None,
        detail: str = "",
        at: float | None = None,
        log: bool = True,
    ) -> None:
        """The stage line; ``at``: when the stage began (wall clock; None: now); ``log``: say
        so in the event lines (a new launch's start is a new stage)."""
        if stage != self._stage or (stage == "starting" and self._launch != self._stage_launch):
            self._stage_since = _monotonic(at)
            self._stage_launch = self._launch
            if log:
                self._event_for_stage(stage, backend, detail, at)
        self._stage, self._backend, self._detail = stage, backend, detail
        self._render_stage()

    def _event_for_stage(
        self, stage: str, backend: str | None, detail: str, at: float | None = None
    ) -> None:
        if stage == "starting":
            self.event("starting the engine", at=at)
        elif stage == "ready":
            waited = _monotonic(at) - self._launch_started
            self.event(f"engine ready after {clock(waited)}", at=at)
        elif stage in ("failed", "stopped", "skipped"):
            self.event(f"{stage}: {detail}" if detail else stage, style="bold red", at=at)
        elif stage in ("warm-up", "measuring"):
            self.event(stage, at=at)
        elif stage == PROFILING:  # a profiled A/B arm's first launch (issue 29)
            self.event("profiling: one wave after the measured run, outside its figures", at=at)

    def _render_stage(self) -> None:
        detail = self._detail
        if self._started is not None and self._stage in CLOCKED:
            waited = clock(time.monotonic() - self._stage_since)
            detail = f"{detail} {waited}".strip()
        mismatch = self._mismatch if self._backend and self._backend != self._mismatch else None
        line = self.query_one("#run-stage", Static)
        width = line.content_size.width or None  # 0 before the first layout: no room known
        line.update(stage_line(self._stage, self._backend, detail, mismatch, width))

    def _tick(self) -> None:
        """Once a second while a job runs: elapsed seconds (engine start, job ETA)."""
        if self._started is None:
            return
        if self._stage in CLOCKED:
            self._render_stage()
        if len(self._plan) > 1:
            now = time.monotonic()
            self.query_one("#run-job", Static).update(
                job_line(
                    self._kind,
                    self._plan,
                    self._launch,
                    now - self._started,
                    now - self._launch_started,
                )
            )

    def progress(self, done: int, total: int | None) -> None:
        bar = self.query_one("#run-progress", ProgressBar)
        bar.display = total is not None  # no `--%` while the total is unknown
        bar.update(total=total, progress=done)

    def figures(
        self,
        tok_s: float | None,
        ttft: float | None,
        itl: float | None,
        done: int,
        total: int | None,
    ) -> None:
        self.query_one("#run-figures", Static).update(figures_line(tok_s, ttft, itl, done, total))

    def note(
        self, text: str, highlight: str | None = None, style: str = "bold", at: float | None = None
    ) -> None:
        """A summary under the stage (the result, or an A/B verdict), wrapped to at most 3 lines;
        ``at``: when it happened (wall clock; None: now)."""
        out = Text(clean(text))  # results and verdicts quote trial ids, knob values, errors
        if highlight:
            out.highlight_words([highlight], style=style)
        self.query_one("#run-figures", Static).update(out)
        self.event(text, style="bold", at=at)

    def event(self, text: str, style: str = "", at: float | None = None) -> None:
        """One of tunelab's own events, with the time of day it happened (``at``; None: now)."""
        line = Text(time.strftime("%H:%M:%S ", time.localtime(at)), style="dim")
        line.append(clean(text), style=style)  # failure reasons quote the engine and servers
        self.query_one("#run-log", RichLog).write(line)

    def engine_line(self, line: str) -> None:
        """One engine log line: kept for the log view (`l`), not shown here.

        Not ``log``: that name is Textual's logger (``self.log.warning(...)``), which
        Textual itself calls on a widget.
        """
        if line.startswith("FAILED: "):  # the screen's failure note is tunelab's, not vLLM's
            return
        self.engine_log.add(line)
        self.border_subtitle = f"engine log: {len(self.engine_log.lines)} lines · l"


def _monotonic(at: float | None) -> float:
    """The panel's clock (monotonic) reading for wall-clock time ``at``; None: now.

    A replayed event happened ``time.time() - at`` seconds ago; never in the future.
    """
    now = time.monotonic()
    return now if at is None else now - max(0.0, time.time() - at)


def slots_text(status: ev.StudyStatus) -> Text:
    """``GPU 0  A1 1a2b3c4d measuring 12/32`` per slot, ``idle`` for a free one."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"{status.running} running on {len(status.slots)} slots", style="bold")
    for slot in status.slots:
        out.append(f"\n{slot.slot:<8}", style="dim")
        if slot.trial_id is None:
            out.append("idle", style="dim")
            continue
        out.append(f"{slot.label} ", style="bold")
        out.append(f"{slot.trial_id[:8]} {slot.stage}")
        if slot.requests_done is not None:
            total = "?" if slot.requests_total is None else slot.requests_total
            out.append(f" {slot.requests_done}/{total}", style="dim")
    return out


def _log_path(trial_id: str) -> Path | None:
    """Where the runner writes the trial's engine log (tuner/trials/runner.py: trials_dir()/id)."""

    try:
        return paths.trials_dir() / trial_id / "engine.log"
    except OSError:
        return None
