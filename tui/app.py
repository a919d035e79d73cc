"""The Textual app: starts the background workers and routes actions to screens and jobs.

Orchestration only. State lives in :class:`tui.session.Session`, rendering in
the screens and widgets, long work in :mod:`tui.jobs`, and every decision
(rules, metrics, verdicts, export) in ``tuner``. Blocking calls — vLLM
introspection, telemetry backend selection, model analysis, preset loading —
run in thread workers; the GPU panel reads the sampler's lock-free ``latest``
on a 2 Hz timer, so input never waits on a driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import BindingType

from tui.commands import KeyActions, TunelabCommands, bindings
from tui.jobs import Jobs
from tui.messages import ConfigLoaded, IntrospectionReady, TelemetryReady
from tui.screens.main import DEMO_LABEL, MainScreen
from tui.services import Services
from tui.session import Session
from tuner.config import EngineConfig


class TunelabApp(KeyActions, App[None]):
    """tunelab's TUI."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "tunelab"
    BINDINGS: ClassVar[list[BindingType]] = bindings()
    COMMANDS = App.COMMANDS | {TunelabCommands}

    def __init__(
        self, model: str | None = None, preset: Path | None = None, services: Services | None = None
    ) -> None:
        super().__init__()
        self.session = Session(services=services or Services(), config=EngineConfig(model=""))
        self.start_model = model
        self.start_preset = preset
        self.jobs = Jobs(self)
        self.sampler: Any = None
        self._backend: Any = None
        self._last_tick: float | None = None
        self._main = MainScreen()

    # -- start-up -------------------------------------------------------------

    def on_mount(self) -> None:
        self.push_screen(self._main)
        self.probe_vllm()
        self.open_telemetry()
        if self.start_model or self.start_preset:
            self.load_start_config(self.start_model, self.start_preset)

    @property
    def main(self) -> MainScreen:
        return self._main

    @work(thread=True, group="introspect")
    def probe_vllm(self) -> None:
        from tuner.rules import Target

        try:
            info = self.session.services.introspect()
        except Exception as exc:  # the app runs without it: the catalogue decides
            self.main.post_message(
                IntrospectionReady(None, Target(note=f"introspection failed: {exc}"))
            )
            return
        gpus = self.session.gpu_count or None
        target = (
            Target.from_introspection(info, gpus=gpus)
            if info.available
            else Target(note=info.error or "")
        )
        self.main.post_message(IntrospectionReady(info, target))

    @work(thread=True, group="telemetry")
    def open_telemetry(self) -> None:
        from tuner.telemetry import Sampler

        backend = self.session.services.telemetry()
        self._backend = backend
        count = backend.count()
        vram_gib = None
        if count:
            first = backend.snapshot(0)  # this thread may block on the driver; the UI does not
            if first.vram_total:
                vram_gib = first.vram_total / 1024**3
        self.session.gpu_count = count
        if count:
            self.sampler = Sampler(
                backend, rate_hz=self.session.services.telemetry_rate_hz, history=60
            )
            self.sampler.start()
        self.main.post_message(
            TelemetryReady(backend.description, tuple(backend.reasons), count, vram_gib)
        )
        self.call_from_thread(self._telemetry_opened, count)

    def _telemetry_opened(self, count: int) -> None:
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
            [s.snapshot.gfx_activity or 0.0 for s in sampler.history(i)] for i in range(len(snaps))
        ]
        # While the cells are still mounting the panel says so: retry on the next poll.
        if self.main.show_telemetry(snaps, histories):
            self._last_tick = sampler.latest_time

    @work(thread=True, exclusive=True, group="config")
    def load_start_config(self, model: str | None, preset: Path | None) -> None:
        """The demo config, a --preset, or a bare --model; built off the event loop."""
        from tuner.cpu_demo import demo_config, resolve_model

        try:
            if preset is not None:
                from tuner.export.preset import load_preset

                config = load_preset(preset).config
                if model:
                    config = EngineConfig(
                        model=resolve_model(model), env=config.env, engine=config.engine
                    )
                label = model or (DEMO_LABEL if _is_demo(config.model) else None)
            elif model == DEMO_LABEL:
                config, label = demo_config(), DEMO_LABEL
            else:
                config, label = EngineConfig(model=resolve_model(model or "")), model
        except Exception as exc:
            self.post_message(ConfigLoaded(None, error=str(exc)))
            return
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

    def set_model(self, model: str) -> None:
        """A model typed or picked: the demo alias brings the demo config, others keep the knobs."""
        if model == DEMO_LABEL:
            self.load_start_config(DEMO_LABEL, None)
            return
        config = self.session.config
        self.session.config = EngineConfig(
            model=model, env=dict(config.env), engine=dict(config.engine)
        )
        self.session.model_label = model
        self.session.model_info = None
        self.main.refresh_all()
        self.main.analyze_model(model)

    # -- actions ---------------------------------------------------------------

    def action_run(self) -> None:
        self.jobs.submit_run()

    def action_ab(self) -> None:
        self.jobs.submit_ab()

    def action_sweep(self) -> None:
        from tui.screens.sweep import SweepDialog, suggest
        from tui.widgets.knob_panel import KnobRow

        focused = self.focused
        chain = list(focused.ancestors_with_self) if focused is not None else []
        row = next((n for n in chain if isinstance(n, KnobRow)), None)
        spec = suggest(row.knob, self.session.config.get(row.knob.key)) if row else ""

        def chosen(text: str | None) -> None:
            if text:
                self.jobs.submit_sweep(text)

        self.push_screen(SweepDialog(spec), chosen)

    def action_stop(self) -> None:
        self.jobs.stop()

    def action_fix(self) -> None:
        fixable = next((f for f in self.session.findings if f.fix), None)
        if fixable is None:
            self.notify("No finding has a fix to apply.")
            return
        self.session.config = self.session.config.with_values(fixable.fix or {})
        self.main.refresh_all()
        self.notify(f"Applied fix: {', '.join(f'{k}={v}' for k, v in (fixable.fix or {}).items())}")

    def action_baseline(self) -> None:
        done = [t for t in self.session.trials if t.results]
        if not done:
            self.notify("No finished trial yet to use as baseline.")
            return
        self.session.baseline_id = done[-1].id
        self.notify(f"Baseline: trial {done[-1].short_id}")

    def action_results(self) -> None:
        from tui.screens.results import ResultsScreen

        if not isinstance(self.screen, ResultsScreen):
            self.push_screen(ResultsScreen())

    def action_compare(self) -> None:
        from tui.screens.compare import CompareScreen

        if not isinstance(self.screen, CompareScreen):
            self.push_screen(CompareScreen())

    def action_export(self) -> None:
        from tui.screens.export import ExportScreen

        if not isinstance(self.screen, ExportScreen):
            self.push_screen(ExportScreen())

    def action_pick_model(self) -> None:
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
        from tui.screens.confirm import ConfirmQuit

        async def answered(yes: bool | None) -> None:
            if yes:
                await self._stop_and_exit()

        self.push_screen(ConfirmQuit(), answered)

    async def _stop_and_exit(self) -> None:
        """Stop the run (engine tree included) and the sampler, then exit."""
        await self.jobs.stop_and_wait()
        if self.sampler is not None:
            self.sampler.stop()
        if self._backend is not None:
            self._backend.close()
        self.exit()


def _is_demo(model: str) -> bool:
    return Path(model).name.startswith("tunelab-tiny")


def run_app(model: str | None = None, preset: Path | None = None) -> None:
    """Entry point used by ``tunelab`` / ``tunelab tui``."""
    TunelabApp(model=model, preset=preset).run()
