"""A Rich progress display driven by trial events: stage, progress bar, ETA, rolling tok/s.

Used by ``tunelab run`` and reusable by the study commands: create it, pass
it as the ``on_event`` callback, and use it as a context manager around the
run. It draws on stderr, so ``--json`` output on stdout stays clean, and it
prints one plain line per stage change and outcome, so a log of a
non-interactive run still tells the story.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from tuner.trials.events import (
    TrialBackend,
    TrialDone,
    TrialEvent,
    TrialFailed,
    TrialProgress,
    TrialPruned,
    TrialQueued,
    TrialSkipped,
    TrialStage,
)

_STAGE_TEXT = {
    "starting": "starting engine",
    "ready": "engine ready",
    "warmup": "warming up",
    "measuring": "measuring",
    "profiling": "profiling (after the measured run)",
    "stopping": "stopping engine",
}


def clock(seconds: float | None) -> str:
    """``1:02:03`` / ``4:05`` for an ETA or elapsed time; ``-:--`` when unknown."""
    if seconds is None:
        return "-:--"
    whole = round(max(0.0, seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class EtaColumn(ProgressColumn):
    """Time left: the task's own ``eta`` field when it has one (a study's model), else Rich's."""

    def __init__(self) -> None:
        super().__init__()
        self._fallback = TimeRemainingColumn()

    def render(self, task: Task) -> Text:
        if "eta" in task.fields:
            return Text(clock(task.fields["eta"]), style="progress.remaining")
        return self._fallback.render(task)


class TrialProgressDisplay:
    """Renders TrialEvents; call the instance with each event.

    Args:
        console: Where to draw (default: stderr).
        show_log: Also print engine log lines (``--verbose``).
    """

    def __init__(self, console: Console | None = None, *, show_log: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.show_log = show_log
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[trial]}[/] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("ETA"),
            EtaColumn(),
            TextColumn("{task.fields[rate]}"),
            console=self.console,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._stage_started: dict[str, float] = {}
        self._closed: set[str] = set()

    def __enter__(self) -> TrialProgressDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _task(self, trial_id: str) -> Any:
        if trial_id not in self._tasks:
            self._tasks[trial_id] = self.progress.add_task(
                "queued", total=None, trial=trial_id[:8], rate=""
            )
        return self._tasks[trial_id]

    def name(self, trial_id: str, text: str) -> None:
        """Show ``text`` (e.g. ``GPU 0 A1``) as the trial's row name, while its row is open."""
        task = self._tasks.get(trial_id)
        if task is not None:
            self.progress.update(task, trial=text)

    def _close(self, trial_id: str) -> None:
        self._closed.add(trial_id)
        task = self._tasks.pop(trial_id, None)
        if task is not None:
            self.progress.remove_task(task)

    def __call__(self, event: TrialEvent) -> None:
        """Updates the display for one event (never raises into the runner)."""
        with contextlib.suppress(Exception):  # a display glitch must not fail a trial
            self._handle(event)

    def _handle(self, event: TrialEvent) -> None:
        log = self.progress.console.print
        if isinstance(event, TrialQueued):
            self._task(event.trial_id)
        elif isinstance(event, TrialStage):
            text = _STAGE_TEXT.get(event.stage, event.stage)
            now = time.monotonic()
            took = now - self._stage_started.get(event.trial_id, now)
            self._stage_started[event.trial_id] = now
            if event.trial_id not in self._closed:
                self.progress.update(self._task(event.trial_id), description=text)
            detail = f" ({escape(event.detail)})" if event.detail else ""
            after = f" after {took:.1f} s" if event.stage in ("ready", "stopping") else ""
            log(f"[dim]{event.trial_id[:8]}[/] {text}{detail}{after}")
        elif isinstance(event, TrialBackend):
            how = " (implied by the platform)" if event.inferred else ""
            log(
                f"[dim]{event.trial_id[:8]}[/] attention backend: requested "
                f"{event.requested or 'auto'}, vLLM uses [bold]{event.actual}[/]{how}"
            )
        elif isinstance(event, TrialProgress):
            p = event.progress
            task = self._task(event.trial_id)
            ttft = f", TTFT p50 {p.ttft_p50_ms:.0f} ms" if p.ttft_p50_ms is not None else ""
            self.progress.update(
                task, total=p.total, completed=p.done, rate=f"{p.tokens_per_s:,.0f} tok/s{ttft}"
            )
        elif isinstance(event, TrialDone):
            trial = event.trial
            self._close(trial.id)
            value = trial.objective_value
            shown = f"{value:,.2f}" if value is not None else "n/a"
            log(f"[green]{trial.short_id} done[/]: {trial.objective} = [bold]{shown}[/]")
        elif isinstance(event, TrialFailed):
            self._close(event.trial.id)
            log(f"[red]{event.trial.short_id} failed[/]: {escape(event.reason)}")
        elif isinstance(event, TrialPruned):
            self._close(event.trial.id)
            log(f"[yellow]{event.trial.short_id} stopped early[/]: {escape(event.reason)}")
        elif isinstance(event, TrialSkipped):
            self._close(event.trial.id)
            log(f"[yellow]{event.trial.short_id} skipped[/]: {escape(event.reason)}")
            for finding in event.findings:
                log(f"  [red]•[/] {escape(finding.message)}")
        elif self.show_log and hasattr(event, "line"):
            log(f"[dim]{escape(event.line)}[/]")
