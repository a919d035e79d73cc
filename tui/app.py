"""The Textual app: starts the background workers and routes actions to screens and jobs.

Orchestration only. State lives in :class:`tui.session.Session`, rendering in
the screens and widgets, long work in :mod:`tui.jobs`, and every decision
(rules, metrics, verdicts, export) in ``tuner``. Blocking calls — vLLM
introspection, telemetry backend selection, model analysis, preset loading —
run in thread workers; the GPU panel reads the sampler's lock-free ``latest``
on a 2 Hz timer, so input never waits on a driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App
from textual.binding import BindingType
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

from tui.commands import TunelabCommands, bindings
from tui.jobs import JobHost, Jobs
from tui.key_actions import KeyActions
from tui.messages import (
    ConfigLoaded,
    IntrospectionReady,
    ModelRequested,
    TelemetryReady,
    VllmValidated,
)
from tui.quiet_driver import QuietLinuxDriver
from tui.screens.main import DEMO_LABEL, MainScreen
from tui.services import Services
from tui.session import Session
from tui.widgets.gpu_panel import SPARK_POINTS
from tui.widgets.knob_panel import KnobPanel, KnobRow
from tui.widgets.status_bar import StatusBar
from tui.worker_errors import WorkerErrors
from tuner import policy
from tuner.config import EngineConfig
from tuner.errors import TunelabError
from tuner.lab import checks, node
from tuner.lab import target as lab_target
from tuner.telemetry import Backend, Sampler
from tuner.trials.store import StoreError, TrialNotFound

if TYPE_CHECKING:
    from tuner.lab.run import RunOptions
    from tuner.rules import Finding, Target

# Screens and core modules a key opens are imported when first used, or by
# :meth:`TunelabApp.warm_imports` once the first frame is out: the first paint
# needs none of them (issue 13 "Speed").
WARM_AFTER_S = 0.5  # after the knob rows are mounted
WARM_MODULES = (
    "tuner.lab.run",
    "tuner.lab.study",
    "tuner.lab.config",
    "tui.screens.results",
    "tui.screens.compare",
    "tui.screens.export",
    "tui.screens.log_view",
)


class TunelabApp(WorkerErrors, KeyActions, App[None]):
    """tunelab's TUI."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "tunelab"
    BINDINGS: ClassVar[list[BindingType]] = bindings()
    COMMANDS = App.COMMANDS | {TunelabCommands}

    def __init__(
        self,
        model: str | None = None,
        preset: Path | None = None,
        services: Services | None = None,
        *,
        allow_code: bool = False,
        preview: Target | None = None,
    ) -> None:
        super().__init__()
        self.session = Session(
            services=services or Services(), config=EngineConfig(model=""), preview=preview
        )
        self.start_model = model
        self.start_preset = preset
        if allow_code:  # tunelab tui --allow-code: for all this process runs (tuner.policy)
            policy.grant(policy.granted().merged(policy.Consent(code=True)))
        self.jobs = Jobs(
            JobHost(
                session=self.session,
                notify=self.notify,
                post=lambda message: self.main.post_message(message),
                begin=lambda title, plan, kind: self.main.run_panel.begin(title, plan, kind),
                engine_state=lambda state: self.main.set_engine_state(state),
                run_worker=self.run_worker,
                options=self.run_options,
            )
        )
        self.sampler: Sampler | None = None
        self._backend: Backend | None = None
        self._last_tick: float | None = None
        self._main = MainScreen(self.session, job_done=self.jobs.finished)

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, except its polling Linux one: ours sleeps while idle."""
        chosen = super().get_driver_class()
        if chosen is LinuxDriver:
            return QuietLinuxDriver
        return chosen

    # -- start-up -------------------------------------------------------------

    def on_mount(self) -> None:
        self._watch_hang_up()
        # From the app's queue, after Textual's start-up batch has closed: Textual
        # (8.2) renders a screen laid out inside that batch and then drops the
        # frame, keeping only later partial updates, so the header stayed blank
        # until the next full layout (``benchmarks/tui_idle.py``).
        self.call_later(self._open)

    def _open(self) -> None:
        """The main screen first (its queue takes the workers' answers), then the workers."""
        self.push_screen(self._main)
        self.probe_vllm()
        self.open_telemetry()
        if self.start_model or self.start_preset:
            self.load_start_config(self.start_model, self.start_preset)

    def on_knob_panel_revealed(self, _message: KnobPanel.Revealed) -> None:
        """The screen is up and its rows mounted: now load what the first keys need."""
        self.set_timer(WARM_AFTER_S, self.warm_imports)
        self.announce_jobs()
        self.show_idle_study()

    @work(thread=True, group="study", exit_on_error=False)
    def show_idle_study(self) -> None:
        """The idle Run panel: the study's baseline and its last result, from earlier sessions."""
        from tui.screens.main import result_line
        from tuner.trials.store import default_path

        path = self.session.services.store_path or default_path()
        if not Path(path).exists():  # nothing stored yet: never create the store to read it
            return
        study = self.jobs.study()
        trials = study.trials()
        base = study.baseline(trials)
        last = study.last_result(trials)
        lines = []
        if base is not None:
            # Figures first: at 80 columns the line is cut, and the figures are what is read.
            lines.append(f"★ {result_line(base.trial)} · baseline: {base.how}")
        if last is not None and (base is None or last.id != base.trial.id):
            lines.append(f"last {result_line(last)}")
        if lines:
            self.call_from_thread(self.main.show_idle, study.name, tuple(lines))

    @work(thread=True, group="forecast", exclusive=True, exit_on_error=False)
    def forecast_next(self) -> None:
        """The Findings panel's forecast of running the current config next: the study's
        model from its measured trials (tuner.lab.study.Study.forecast_next)."""
        from textual.worker import get_current_worker

        from tui.widgets.findings_panel import FindingsPanel
        from tuner.trials.store import default_path

        session = self.session
        path = session.services.store_path or default_path()
        if session.workload is None or not Path(path).exists():
            return  # nothing stored yet: never create the store to read it
        study = self.jobs.study()
        found = study.forecast_next(
            session.config, session.workload, model_info=session.model_info, node=session.target
        )
        text = found.short()
        if not get_current_worker().is_cancelled:
            panel = self.main.query_one(FindingsPanel)
            self.call_from_thread(panel.show_forecast, text)

    @work(thread=True, group="warm", exit_on_error=False)
    def warm_imports(self) -> None:
        """Load what the first r, t, c or e needs, once the screen is up (not on a key press)."""

        for name in WARM_MODULES:
            importlib.import_module(name)

    @property
    def main(self) -> MainScreen:
        return self._main

    def run_options(self) -> RunOptions:
        """How the next trial runs: the services' engine, the session's target, the sampler."""
        # Deferred: the engine stack loads when a job starts, not at first paint.
        from tuner.lab.run import RunOptions

        session, services = self.session, self.session.services
        return RunOptions(
            python=services.engine_python,
            startup_timeout=services.startup_timeout,
            target=session.target,
            model_info=session.model_info,
            sampler=self.sampler,
            command_for=services.engine_command,
            # The client in its own process: the UI's frames and GIL delay none of its reads.
            client_process=True,
        )

    # exit_on_error=False: a failing worker is reported (tui.worker_errors), the app stays up.
    @work(thread=True, group="introspect", exit_on_error=False)
    def probe_vllm(self) -> None:
        try:
            info = self.session.services.introspect()
        except Exception as exc:  # the app runs without it: the catalogue decides
            error = f"introspection failed: {exc}"
            self.main.post_message(
                IntrospectionReady(None, lab_target.from_introspection(None, error))
            )
            return
        self.main.post_message(IntrospectionReady(info, lab_target.from_introspection(info)))

    @work(thread=True, group="telemetry", exit_on_error=False)
    def open_telemetry(self) -> None:
        backend = self.session.services.telemetry()
        self._backend = backend
        # The same reading every face's target is built from (tuner.rules.node_target);
        # this thread may block on the driver, the UI does not.
        gpus = lab_target.read_backend(backend)
        count, vram_gib, name, partition = gpus.count, gpus.vram_gib, gpus.name, gpus.partition
        self.session.gpu_count = count
        if count:
            rate = self.session.services.telemetry_rate_hz
            # The ring spans a whole measured run (tuner.lab.node), as every face's does.
            self.sampler = Sampler(backend, rate_hz=rate, history=node.history_for(rate))
            self.sampler.start()
        self.main.post_message(
            TelemetryReady(
                backend.description, tuple(backend.reasons), count, vram_gib, name, partition
            )
        )
        self.call_from_thread(self.telemetry_opened, count)

    def telemetry_opened(self, count: int) -> None:
        """The GPUs are known (0 also when telemetry failed): poll them, or load the demo."""
        if count:
            period = min(0.5, 1.0 / self.session.services.telemetry_rate_hz)
            self.set_interval(period, self._poll_telemetry)
        if not (self.start_model or self.start_preset):
            if count == 0:
                self.load_start_config(DEMO_LABEL, None)
            else:
                self.notify("Type a model id or path (or press m to pick one).", timeout=6)

    def _poll_telemetry(self) -> None:
        sampler = self.sampler
        if (
            sampler is None
            or sampler.latest_time == self._last_tick
            or self.screen is not self.main
        ):
            return
        snaps = sampler.latest()
        histories = [
            [s.snapshot.gfx_activity or 0.0 for s in sampler.history(i, last=SPARK_POINTS)]
            for i in range(len(snaps))
        ]
        # While the cells are still mounting the panel says so: retry on the next poll.
        if self.main.show_telemetry(snaps, histories):
            self._last_tick = sampler.latest_time

    @work(thread=True, exclusive=True, group="config", exit_on_error=False)
    def load_start_config(self, model: str | None, preset: Path | None) -> None:
        """The demo config, a --preset, or a bare --model (tuner.lab.config); off the event loop."""
        # Deferred: loads with the first config change, not at first paint.
        from tuner.lab import config as lab_config

        try:
            config = lab_config.build_config(preset, model)
        except lab_config.ConfigInputError as exc:
            self.post_message(ConfigLoaded(None, error=str(exc)))
            return
        label = model or (DEMO_LABEL if _is_demo(config.model) else None)
        self.post_message(ConfigLoaded(config, label))

    def on_config_loaded(self, message: ConfigLoaded) -> None:
        if message.config is None:
            self.notify(
                f"Cannot load the start config: {message.error}", severity="error", timeout=10
            )
            return
        self.session.config = message.config
        self.session.model_label = message.label
        self.main.refresh_all()
        if message.config.model:
            self.main.analyze_model(message.config.model)

    def on_model_requested(self, message: ModelRequested) -> None:
        self.set_model(message.model)

    def set_model(self, model: str) -> None:
        """A model typed or picked: the demo alias brings the demo config, others keep the knobs."""
        if model == DEMO_LABEL:
            self.load_start_config(DEMO_LABEL, None)
            return
        # Deferred: loads with the first config change, not at first paint.
        from tuner.lab import config as lab_config

        try:
            self.session.config = lab_config.with_model(self.session.config, model)
        except lab_config.ConfigInputError as exc:
            self.notify(str(exc), severity="error", timeout=8)
            return
        self.session.model_label = model
        self.session.model_info = None
        self.main.refresh_all()
        self.main.analyze_model(model)

    # -- actions ---------------------------------------------------------------

    def action_run(self) -> None:
        self.jobs.submit_run()

    def action_ab(self) -> None:
        self.jobs.submit_ab()

    def action_ab_profile(self) -> None:
        self.jobs.submit_ab(profile=True)

    def action_sweep(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.sweep import SweepDialog, suggest

        focused = self.focused
        chain = list(focused.ancestors_with_self) if focused is not None else []
        row = next((n for n in chain if isinstance(n, KnobRow)), None)
        spec = suggest(row.knob, self.session.config.get(row.knob.key)) if row else ""

        def chosen(text: str | None) -> None:
            if text:
                self.jobs.submit_sweep(text)

        self.push_screen(SweepDialog(spec), chosen)

    def action_preview_target(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.target import TargetDialog

        current = self.session.preview

        def chosen(text: str | None) -> None:
            if text is None:
                return
            try:
                found = lab_target.parse_preview(text)
            except TunelabError as exc:
                fix = f" ({exc.fix})" if exc.fix else ""
                self.notify(f"{exc.message}{fix}", severity="error", timeout=10)
                return
            self.main.set_preview(found)
            said = lab_target.preview_label(found) if found else "the rules judge this node again"
            self.notify(said.capitalize(), timeout=6)

        self.push_screen(TargetDialog(TargetDialog.text_of(current)), chosen)

    def action_validate(self) -> None:
        """``v``: the installed vLLM's own validation of the config, off the event loop."""
        session = self.session
        if session.preview is not None:
            self.notify(
                "Validation asks the vLLM installed here, not the previewed node's: "
                "press g and clear the target first",
                severity="warning",
                timeout=8,
            )
            return
        if checks.blocks_run([f for f in session.findings if f.rule == "policy"]):
            self.notify(
                "The preset policy refuses this config (see the findings); vLLM is not asked",
                severity="error",
                timeout=8,
            )
            return
        self.notify("Asking the installed vLLM to build this config …", timeout=4)
        self._validate(session.config)

    @work(thread=True, exclusive=True, group="validate", exit_on_error=False)
    def _validate(self, config: EngineConfig) -> None:
        verdict = checks.ask_vllm(config)
        self.main.post_message(VllmValidated(verdict))

    def action_capacity(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.capacity import CapacityDialog
        from tuner.lab.capacity import suggested_slo

        def chosen(text: str | None) -> None:
            if text:
                self.jobs.submit_capacity(text)

        self.push_screen(CapacityDialog(suggested_slo(self.session.workload)), chosen)

    def action_stop(self) -> None:
        self.jobs.stop()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``f`` is offered only while a finding carries a fix (hidden from the footer otherwise)."""
        if action == "fix":
            return bool(checks.fixable(self.session.findings))
        return True

    def action_fix(self) -> None:
        """Apply a finding's fix; with several, let the user pick which."""
        fixable = checks.fixable(self.session.findings)
        if not fixable:
            self.notify("No finding has a fix to apply.")
            return
        if len(fixable) == 1:
            self.apply_fix(fixable[0])
            return
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.fix_picker import FixPicker

        def chosen(finding: Finding | None) -> None:
            if finding is not None:
                self.apply_fix(finding)

        self.push_screen(FixPicker(fixable), chosen)

    def apply_fix(self, finding: Finding) -> None:
        """Set the knob values of ``finding``'s fix and re-check."""
        fix = finding.fix or {}
        self.session.config = self.session.config.with_values(fix)
        for key in fix:
            self.session.invalid.pop(key, None)
        self.main.refresh_all()
        self.notify(f"Applied fix: {checks.describe_fix(finding)}")

    def action_baseline(self) -> None:
        done = [t for t in self.session.trials if t.results]
        if not done:
            self.notify("No finished trial yet to use as baseline.")
            return

        try:
            chosen = self.jobs.study().mark_baseline(done[-1].id)
        except (StoreError, TrialNotFound) as exc:
            self.notify(f"Cannot keep the baseline: {exc}", severity="error")
            return
        self.notify(f"Baseline: trial {chosen.trial.short_id}")

    def action_results(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.results import ResultsScreen

        if not isinstance(self.screen, ResultsScreen):
            self.push_screen(
                ResultsScreen(
                    self.jobs.study(),
                    header=self.main.query_one(StatusBar),
                    store_path=self.session.services.store_path,
                )
            )

    def action_compare(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.compare import CompareScreen

        if not isinstance(self.screen, CompareScreen):
            self.push_screen(CompareScreen(self.jobs.study()))

    def action_export(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.export import ExportScreen

        if not isinstance(self.screen, ExportScreen):
            self.push_screen(
                ExportScreen(self.jobs.study(), store_path=self.session.services.store_path)
            )

    def action_pick_model(self) -> None:
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.model_picker import ModelPicker

        def picked(model: str | None) -> None:
            if model:
                self.set_model(model)

        self.push_screen(ModelPicker(), picked)

    def action_toggle_dark(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    async def action_quit(self) -> None:
        if not self.jobs.active:
            await self._stop_and_exit()
            return
        # Deferred to first use: the first paint composes the main screen only.
        from tui.screens.confirm import ConfirmQuit

        async def answered(yes: bool | None) -> None:
            if yes:
                await self._stop_and_exit()

        self.push_screen(ConfirmQuit(self.jobs.following), answered)

    def _watch_hang_up(self) -> None:
        """A dropped SSH session (SIGHUP) ends the TUI as ``q`` then ``y`` would.

        Without a handler the process dies at once: the reaper still ends the
        engine, but the trial stays "running" until the next start recovers it.
        With it, the run is stopped, its trial marked interrupted and the engine
        stopped before exit. Work started with ``tunelab jobs start`` lives in
        the study service and is not touched.
        """
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._hung_up)

    def _hung_up(self) -> None:
        self.run_worker(self._hang_up_exit(), group="hang-up", exclusive=True)

    async def _hang_up_exit(self) -> None:
        """Stop the work, then leave without restoring a terminal that is gone.

        Textual's own exit writes the terminal's reset sequences through its
        output thread, which died on the closed terminal: that exit would block
        for ever (seen in test_reliability_tui_hangup.py), so the process ends
        itself once the run is stopped and its trial recorded. Under a test
        pilot (headless) there is a terminal to keep: a normal exit.
        """
        await self._stop_work()
        if self.is_headless:
            self.exit()
            return
        os._exit(128 + signal.SIGHUP)

    def on_unmount(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)

    async def _stop_and_exit(self) -> None:
        """Stop the run (engine tree included) and the sampler, then exit."""
        await self._stop_work()
        self.exit()

    async def _stop_work(self) -> None:
        """Stop the run (its trial recorded, engine tree stopped), the sampler and telemetry."""
        await self.jobs.stop_and_wait()
        if self.sampler is not None:
            self.sampler.stop()
        if self._backend is not None:
            self._backend.close()


def _is_demo(model: str) -> bool:
    return Path(model).name.startswith("tunelab-tiny")


def run_app(model: str | None = None, preset: Path | None = None) -> None:
    """Entry point used by ``tunelab`` / ``tunelab tui``."""
    TunelabApp(model=model, preset=preset).run()
