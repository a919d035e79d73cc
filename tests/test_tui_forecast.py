"""The TUI shows how far the study model's forecast, stored before a run, was from its figures.

The line is the core's (tuner.perfmodel.forecast.ForecastScore.describe) for the finished
trial the run panel receives; a trial with no known forecast adds no line.
"""

from __future__ import annotations

from textual.widgets import RichLog

from tests.support.tui_harness import services, settle
from tests.test_perfmodel_forecast import _candidate, _study
from tui.app import TunelabApp
from tui.messages import RunEvent
from tuner.perfmodel.forecast import Forecast, forecast, score_of
from tuner.trials import events as ev
from tuner.trials.model import TrialStatus


def _log_text(app: TunelabApp) -> str:
    lines = [strip.text for strip in app.main.query_one("#run-log", RichLog).lines]
    return " ".join(" ".join(lines).split())


async def test_a_finished_run_shows_how_far_the_stored_forecast_was() -> None:
    trial = _candidate(32, 16)
    trial.prediction = forecast(_study(), trial).to_dict()
    said = Forecast.from_dict(trial.prediction).output_throughput
    assert said is not None
    trial.status = TrialStatus.DONE
    trial.results = {"output_throughput": said * 0.6, "duration": 12.0, "completed": 128}
    trial.server = {"mean_itl_ms": 4.0}
    unknown = _candidate(8, 4)
    unknown.prediction = Forecast(
        reason="no measured trial of this study to learn from yet"
    ).to_dict()
    unknown.status, unknown.results = TrialStatus.DONE, {"output_throughput": 100.0}
    app = TunelabApp(services=services())
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        app.main.post_message(RunEvent(job=1, event=ev.TrialDone(unknown)))
        await settle(pilot)
        assert "model said" not in _log_text(app)
        app.main.post_message(RunEvent(job=1, event=ev.TrialDone(trial)))
        await settle(pilot)
        score = score_of(trial)
        assert score is not None and not score.inside
        assert " ".join(score.describe().split()) in _log_text(app)
        assert "OUTSIDE its 80 % interval" in _log_text(app)


async def test_the_findings_panel_forecasts_the_next_run_as_the_core_does() -> None:
    from tests.support.tui_harness import wait_for
    from tui.widgets.findings_panel import FindingsPanel
    from tuner.bench.workload import Workload
    from tuner.config import EngineConfig
    from tuner.lab.study import Study
    from tuner.trials.store import TrialStore, default_path

    app = TunelabApp(services=services())
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(FindingsPanel)
        assert panel.border_subtitle == ""  # no store, nothing to learn from: nothing said
        with TrialStore(default_path()) as store:
            for t in _study(app.session.study):
                store.add(t)
            trials = store.list(study=app.session.study)
        config = EngineConfig("m", engine={"max-num-seqs": 32})
        workload = Workload(input_len=256, output_len=64, num_prompts=64, concurrency=16)
        want = Study(None, app.session.study).forecast_next(config, workload, trials).short()
        assert want.startswith("next run ≈ ")
        app.session.config, app.session.workload = config, workload
        app.main.recheck()
        await wait_for(pilot, lambda: panel.border_subtitle == want, what="the forecast")
        # A knob the model does not know: it says so instead of guessing.
        app.session.config = config.with_values({"enable-chunked-prefill": False})
        app.main.recheck()
        await wait_for(
            pilot,
            lambda: panel.border_subtitle == "next run: unknown until run",
            what="unknown until run",
        )
