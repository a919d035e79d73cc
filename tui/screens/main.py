"""The main screen: GPUs, model, knobs with live findings, workload, and the run.

It holds the session's editable state (config, workload, target, findings)
and sets it down into the widgets; widgets and workers report back with the
messages of :mod:`tui.messages`. Blocking work (introspection, telemetry
selection, model analysis) runs in thread workers; rule checks take well
under a millisecond and run inline on every edit. The run itself is the
app's job (:mod:`tui.jobs`); this screen only renders its events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from tui.messages import (
    IntrospectionReady,
    JobFinished,
    JobKind,
    KnobChanged,
    KnobFocused,
    KnobInvalid,
    ModelAnalyzed,
    RunEvent,
    TelemetryReady,
    VllmValidated,
    WorkloadChanged,
)
from tui.session import Session
from tui.widgets.findings_panel import FindingsPanel
from tui.widgets.footer import TunelabFooter
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.knob_panel import KnobPanel
from tui.widgets.model_panel import ModelPanel, human_bytes
from tui.widgets.run_panel import RunPanel
from tui.widgets.status_bar import StatusBar
from tui.widgets.workload_panel import WorkloadPanel
from tuner.bench.metrics import delivery_warning
from tuner.bench.window import window_note
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.foreign_text import one_line
from tuner.lab import checks
from tuner.lab import target as lab_target
from tuner.lab.fit import FitState, fit_summary
from tuner.model import ModelError, ModelInfo, analyze
from tuner.rules import Finding, Target
from tuner.telemetry import GpuSnapshot
from tuner.trials import events as ev
from tuner.trials.model import Trial

DEMO_LABEL = "tunelab:demo"


class Body(Horizontal):
    """The panels under the GPU panel; draws nothing of its own (see MainScreen.BLANK)."""

    BLANK = True


class MainScreen(Screen[None]):
    """The tuning screen.

    The screen and the body only paint their background, so they render as
    blank (``BLANK``): Textual re-renders every widget whose clip overlaps a
    dirty region, these two whole, on each 2 Hz GPU repaint (issue 13's idle).
    """

    BLANK = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave_input", "Leave field", show=False, id="main.leave_input"),
    ]

    _backend: str | None = None
    _stage: str = "starting"
    _gpus: tuple[int, float | None, str | None, str | None] | None = None
    _probing: Timer | None = None  # the header's probe clock while vLLM is introspected
    _probing_since = 0.0

    def __init__(self, session: Session, job_done: Callable[[int], object]) -> None:
        """``session`` is the state it renders; ``job_done(id)`` starts the queue's next job."""
        super().__init__()
        self.session = session
        self.job_done = job_done
        self._gpu_panel: GpuPanel | None = None  # found once: the 2 Hz refresh skips the query

    def compose(self) -> ComposeResult:
        session = self.session
        # The start workload (Session's default); only an edit in its panel makes it None.
        assert session.workload is not None
        yield StatusBar(id="status")
        yield GpuPanel(id="gpus")
        with Body(id="body"):
            with Vertical(id="left"):
                yield ModelPanel(id="model")
                yield WorkloadPanel(session.workload, id="workload")
                yield RunPanel(id="run")
            with Vertical(id="right"):
                yield KnobPanel(id="knobs")
                with VerticalScroll(id="knob-help-box"):  # a long help scrolls, not cut
                    yield Static("", id="knob-help")
                yield FindingsPanel(id="findings")
        yield TunelabFooter(compact=True)

    def on_mount(self) -> None:
        session = self.session
        self.query_one(StatusBar).node = session.services.node
        self.query_one("#knob-help", Static).update(
            Text("Focus a knob to read its help. Tab moves, space toggles.", style="dim")
        )
        self.refresh_all()
        if session.preview is not None:  # tunelab tui --gpu ...: the header says so at once
            self.show_target()
        self.query_one(KnobPanel).focus()  # keys work at once; Tab walks into the knobs
        self.call_after_refresh(self.first_frame_shown)
        if session.vllm_info is None:  # the probe runs: say how long, once it is slow
            self._probing_since = time.monotonic()
            self._probing = self.set_interval(1.0, self._probing_tick)

    def _probing_tick(self) -> None:
        """``vLLM: probing… 12 s``: a first start imports vLLM once (~30-60 s on CPU)."""
        if self.session.vllm_info is not None and self._probing is not None:
            self._probing.stop()
            return
        waited = time.monotonic() - self._probing_since
        self.query_one(
            StatusBar
        ).vllm = f"vLLM: probing… {waited:.0f} s (first start: vLLM is imported once, then cached)"

    def show_idle(self, study: str, lines: tuple[str, ...]) -> None:
        """What the study holds, in the idle Run panel (never over a job's own lines)."""
        if not self.app.jobs.active:  # type: ignore[attr-defined]
            self.run_panel.show_idle(study, lines)

    def first_frame_shown(self) -> None:
        """The first frame is on its way to the terminal: the deferred knob rows may mount now."""
        self.query_one(KnobPanel).reveal_soon()

    def action_leave_input(self) -> None:
        """Esc leaves a text field so the single-key actions (r, a, f ...) work again."""
        self.query_one(KnobPanel).focus()

    # -- setting state down ---------------------------------------------------

    def refresh_all(self) -> None:
        """Re-render everything from the session (after any state change).

        Before the screen has composed there is nothing to render into: on_mount
        renders the session then (the start config can load first on a fast start).
        """
        if not self.query(ModelPanel):
            return
        session = self.session
        self.query_one(ModelPanel).set_model(session.config.model, session.model_label)
        self.query_one(StatusBar).model = session.model_label or session.config.model
        self.query_one(KnobPanel).show_config(session.config, keep=session.invalid.keys())
        self.recheck()

    def recheck(self) -> list[Finding]:
        """Run the rules (and the invalid knob texts) on the current config; show the findings."""
        session = self.session
        found = checks.findings(
            session.config,
            session.model_info,
            session.rules_target,
            session.workload,
            session.invalid,
        )
        session.findings = checks.with_verdict(found, session.verdict, session.config)
        empty = checks.no_findings_text(session.model_info, session.rules_target)
        self.query_one(FindingsPanel).show(session.findings, empty)
        self.app.refresh_bindings()  # `f` is offered only while a finding has a fix
        self.app.forecast_next()  # type: ignore[attr-defined]
        return session.findings

    def set_engine_state(self, state: str) -> None:
        self.query_one(StatusBar).engine_state = state

    @property
    def run_panel(self) -> RunPanel:
        return self.query_one(RunPanel)

    # -- messages up ---------------------------------------------------------

    @on(VllmValidated)
    def _vllm_validated(self, message: VllmValidated) -> None:
        """vLLM's own verdict joins the findings while the config is the one it judged."""
        self.session.verdict = message.verdict
        self.recheck()
        stale = message.verdict.config != self.session.config
        note = message.verdict.note + (" (the config has changed since)" if stale else "")
        refused = checks.blocks_run(message.verdict.findings)
        self.app.notify(
            note[:1].upper() + note[1:], severity="error" if refused else "information", timeout=10
        )

    @on(KnobChanged)
    def _knob_changed(self, message: KnobChanged) -> None:
        session = self.session
        session.invalid.pop(message.key, None)
        session.config = session.config.with_values({message.key: message.value})
        self.recheck()

    @on(KnobInvalid)
    def _knob_invalid(self, message: KnobInvalid) -> None:
        """Invalid text is an error finding until corrected; the config keeps no stale value."""
        session = self.session
        session.invalid[message.key] = message.error
        session.config = session.config.with_values({message.key: None})
        self.query_one("#knob-help", Static).update(Text(message.error, style="bold red"))
        self.recheck()

    @on(KnobFocused)
    def _knob_focused(self, message: KnobFocused) -> None:
        row = self.query_one(KnobPanel).row(message.key)
        help_text = Text(row.help_text())
        value = self.session.config.get(message.key)
        if value is None:
            help_text.append("  (unset: vLLM default)", style="dim")
        self.query_one("#knob-help", Static).update(help_text)

    @on(WorkloadChanged)
    def _workload_changed(self, message: WorkloadChanged) -> None:
        session = self.session
        session.workload = message.workload
        session.workload_error = message.error
        if message.error:
            self.query_one("#knob-help", Static).update(Text(message.error, style="bold red"))
        self.recheck()

    # -- background work -----------------------------------------------------

    @work(thread=True, exclusive=True, group="analyze", exit_on_error=False)
    def analyze_model(self, model: str) -> None:
        """Model analysis reads files (and maybe the hub): off the event loop."""
        try:
            info = analyze(model)
        except ModelError as exc:
            self.post_message(ModelAnalyzed(model, None, str(exc)))
            return
        except Exception as exc:  # a broken config.json must not take the app down
            self.post_message(ModelAnalyzed(model, None, f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(ModelAnalyzed(model, info))

    @on(ModelAnalyzed)
    def _model_analyzed(self, message: ModelAnalyzed) -> None:
        session = self.session
        if message.model != session.config.model:
            return  # a stale answer for a model the user already replaced
        panel = self.query_one(ModelPanel)
        if message.info is None:
            session.model_info = None
            panel.show_info(Text(f"cannot analyze: {one_line(message.error)}", style="red"))
        else:
            session.model_info = message.info
            panel.show_info(
                model_line(message.info, session.config, session.rules_target, session.workload)
            )
        self.recheck()

    def _with_gpus(self, target: Target) -> Target:
        """The target with telemetry's GPUs (tuner.lab.target: measured beats introspected)."""
        count, vram, name, partition = self._gpus or (0, None, None, None)
        return lab_target.with_node_gpus(target, count, vram, name, partition)

    @on(IntrospectionReady)
    def _introspected(self, message: IntrospectionReady) -> None:
        session = self.session
        session.vllm_info = message.info
        if self._probing is not None:
            self._probing.stop()
        session.target = self._with_gpus(message.target)
        info = message.info
        if info is None or not info.available:
            reason = (info.error if info is not None else None) or message.target.note
            self.notify(f"vLLM not usable: {reason}", severity="warning", timeout=8)
        self.show_target()

    def show_target(self) -> None:
        """The header, ⊘ marks, fit and findings for the rules' target (a preview or this node)."""
        session = self.session
        info = session.vllm_info
        bar = self.query_one(StatusBar)
        if session.preview is not None:
            bar.vllm = lab_target.preview_label(session.preview)
        elif info is not None and info.available:
            bar.vllm = f"vLLM {info.version} ({(info.platform or '?').upper()})"
        elif info is not None or session.target.note:
            bar.vllm = "vLLM: not found"
        else:
            bar.vllm = "vLLM: probing…"
        target: Target = session.rules_target
        if target.vllm_version or target.platform:
            self.query_one(KnobPanel).mark_availability(target.vllm_version, target.platform)
        if session.model_info is not None:
            self.query_one(ModelPanel).show_info(
                model_line(session.model_info, session.config, target, session.workload)
            )
        self.recheck()

    def set_preview(self, preview: Target | None) -> None:
        """Judge against ``preview`` (another node's target), or this node again (None)."""
        self.session.preview = preview
        self.show_target()

    @on(TelemetryReady)
    def _telemetry_ready(self, message: TelemetryReady) -> None:
        session = self.session
        if message.count:
            self._gpus = (message.count, message.vram_gib, message.gpu_name, message.partition)
            session.target = self._with_gpus(session.target)
            if session.model_info is not None:
                self.query_one(ModelPanel).show_info(
                    model_line(
                        session.model_info, session.config, session.rules_target, session.workload
                    )
                )
            self.recheck()
        panel = self.query_one(GpuPanel)
        if message.count == 0:
            panel.show_none(message.description, message.reasons)
        else:
            panel.setup(message.count, message.description)

    def telemetry_failed(self, why: str) -> None:
        """The telemetry worker failed: the GPU panel says so instead of "starting…"."""
        self.query_one(GpuPanel).show_none("telemetry failed", [why])

    @on(RunEvent)
    def _run_event(self, message: RunEvent) -> None:
        """Render one trial event in the run panel and the header."""
        event, panel, at = message.event, self.run_panel, message.at
        panel.trial_event(event, at)  # launch count, log file, shutdown marking, backend asked for
        if isinstance(event, ev.TrialStage):
            stage = "warm-up" if event.stage == "warmup" else event.stage
            self._stage = stage
            if stage == "stopping":
                self.set_engine_state("stopping")
            else:
                self.set_engine_state(stage)
                detail = event.detail if stage != "ready" else ""
                panel.stage(stage, self._backend, detail, at=at)
        elif isinstance(event, ev.TrialBackend):
            self._backend = event.actual or event.requested
            panel.stage(getattr(self, "_stage", "ready"), self._backend)
        elif isinstance(event, ev.TrialLog):
            panel.engine_line(event.line)
        elif isinstance(event, ev.TrialProgress):
            p = event.progress
            panel.progress(p.done, p.total)
            panel.figures(p.tokens_per_s, p.ttft_p50_ms, p.itl_p50_ms, p.done, p.total)
        elif isinstance(event, ev.TrialDone):
            trial = event.trial
            panel.stage("done", self._backend, at=at)
            # A capacity probe's load sets its window, not the user's workload; an A/B's
            # repeats are judged together (the A/B's notes: tuner.bench.window.repeats_note).
            window = None if trial.is_probe or trial.arm else window_note(trial.results)
            line = result_line(trial)
            panel.note(f"{line} · {window.short()}" if window else line, at=at)
            if window is not None:
                panel.event(f"⚠ {window.describe()}", style="yellow", at=at)
            self._forecast_score(trial, at)
        elif isinstance(event, ev.TrialFailed):
            panel.stage("failed", None, event.reason, at=at)
            panel.engine_line(f"FAILED: {event.reason}")
            if event.trial.is_probe:  # a measured probe that failed is a miss at its load
                panel.note(result_line(event.trial), at=at)
        elif isinstance(event, ev.StudyStatus):
            panel.study_status(event)
            self.query_one(GpuPanel).occupy(event.by_gpu())
        elif isinstance(event, ev.TrialSkipped):
            panel.stage("skipped", None, event.reason, at=at)

    def _forecast_score(self, trial: Trial, at: float | None) -> None:
        """How far the study model's forecast, stored before the run, was from its figures."""
        from tuner.perfmodel.forecast import score_of  # light: no numpy behind it

        score = score_of(trial)
        if score is not None:
            panel = self.run_panel
            panel.event(score.describe(), style="" if score.inside else "yellow", at=at)

    @on(JobFinished)
    def _job_finished(self, message: JobFinished) -> None:
        # A job ran, so the study modules are loaded; not imported at first paint.
        from tuner.lab.reports import ABReport, CapacityReport, SweepReport

        panel = self.run_panel
        self.app.forecast_next()  # type: ignore[attr-defined]  # the study learned from it
        stopped = not message.ok and "stopped" in message.summary
        panel.end("done" if message.ok else "stopped" if stopped else "failed")
        self._backend = None
        result = message.result
        if message.kind is JobKind.AB and message.ok and isinstance(result, ABReport):
            report = result
            verdict = str(report.verdict)
            style = {"A better": "bold red", "B better": "bold green"}.get(verdict, "bold yellow")
            panel.note(report.summary(), highlight=verdict, style=style)
            self.notify(f"A/B: {report.summary()}", timeout=12)
        elif message.kind is JobKind.SWEEP and message.ok and isinstance(result, SweepReport):
            panel.note(f"sweep best: {result.best_values} (trial {str(result.best_trial)[:8]})")
        elif message.kind is JobKind.CAPACITY and message.ok and isinstance(result, CapacityReport):
            panel.note(result.summary(), style="bold")
            self.notify(f"Capacity: {result.summary()}", timeout=12)
        elif not message.ok:
            panel.stage(
                "stopped" if "stopped" in message.summary else "failed", None, message.summary
            )
            for line in message.kept:
                panel.note(f"kept: {line}", style="bold")
            if message.kind is JobKind.CAPACITY and not message.kept:
                panel.note("kept: no launch measured a probe")
        self.set_engine_state("idle")
        self.job_done(message.job)

    def show_telemetry(self, snaps: Sequence[GpuSnapshot], histories: list[list[float]]) -> bool:
        """Hand the newest samples to the GPU panel; False if it could not show them all yet."""
        panel = self._gpu_panel
        if panel is None or not panel.is_attached:
            try:
                panel = self._gpu_panel = self.query_one(GpuPanel)
            except NoMatches:  # not composed yet, or torn down at quit while a poll was due
                return False
        return panel.show(snaps, histories)


def model_line(
    info: ModelInfo, config: EngineConfig, target: Target, workload: Workload | None = None
) -> Text:
    """`Llama · GQA · 0.8 MiB · fits · KV 4.0 KiB/tok` for the model panel (fit first: it matters most).

    The fit is :func:`tuner.lab.fit.fit_summary`: the memory rule's own estimate.
    """
    out = Text(no_wrap=True, overflow="ellipsis")
    arch = one_line(info.architecture or info.model_type or "?").removesuffix("ForCausalLM")
    kind = str(info.attention).upper()
    if info.is_moe and info.moe is not None:
        kind += f" MoE {info.moe.num_experts}e"
    out.append(f"{arch} · {kind} · {human_bytes(info.weight_bytes)} · ")
    fit = fit_summary(info, config, target, workload)
    style = {FitState.FITS: "green", FitState.DOES_NOT_FIT: "bold red", FitState.QUEUES: "yellow"}
    out.append(str(fit.state), style=style.get(fit.state, "dim"))
    if fit.vram_gib and fit.state is not FitState.CPU:
        out.append(f" {fit.gpus}×{fit.vram_gib:.0f} GiB", style="dim")
    out.append(f" · KV {human_bytes(fit.kv_bytes_per_token)}/tok")
    return out


def result_line(trial: Trial) -> str:
    """`trial 1a2b3c4d: 812 tok/s · TTFT p99 41.0 ms · ITL p99 9.1 ms` for the run panel.

    A capacity probe says its load and ✓/✗ against the SLO instead
    (``probe L1 · 16 users ✓ · p99_ttft_ms 312 (<= 500)``, the core's probe line).
    """
    if trial.is_probe:
        from tuner.lab.reports import probe_view  # a capacity job ran: the studies are loaded

        view = probe_view(trial)
        if view is not None:
            return f"trial {trial.short_id} {view.line()}"
    r = trial.results or {}

    def num(key: str, fmt: str) -> str:
        value = r.get(key)
        return "–" if not isinstance(value, int | float) else format(value, fmt)

    line = (
        f"trial {trial.short_id}: {num('output_throughput', '.0f')} tok/s · "
        f"TTFT p99 {num('p99_ttft_ms', '.1f')} ms · ITL p99 {num('p99_itl_ms', '.1f')} ms"
    )
    warning = delivery_warning(r, short=True)
    return f"{line} · ⚠ {warning}" if warning else line
