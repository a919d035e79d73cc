"""The report's forecast-vs-measured figure and table are the core's record (issue 31).

Every trial stores the study model's forecast before its measured run
(tuner.perfmodel.forecast); the report plots each against what was then measured and
states the study's record in the words `tunelab model` uses. A study with no known
forecast has no such section.
"""

from __future__ import annotations

import html
import time
from pathlib import Path

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.lab.study import Study
from tuner.perfmodel.forecast import Forecast, record_of, record_text, score_of
from tuner.report import collect, write_report
from tuner.report.markdown import _md
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

# (forecast tok/s, its band, measured tok/s, engine ITL forecast and measured)
RUNS = ((2000.0, 0.2, 2100.0, 5.0, 5.1), (3000.0, 0.1, 1800.0, 4.0, 4.1), (0.0, 0.0, 900.0, 0, 6))


def _fill(db: Path) -> list[Trial]:
    wl = Workload(input_len=128, output_len=64, num_prompts=32, concurrency=8)
    now = time.time()
    made = []
    with TrialStore(db) as store:
        for i, (said, band, tput, itl_said, itl) in enumerate(RUNS):
            known = said > 0
            prediction = (Forecast(said, itl_said, band, band, 5) if known
                          else Forecast(reason="2 measured trial(s) like it")).to_dict()  # fmt: skip
            trial = Trial(EngineConfig("org/m", engine={"max-num-seqs": 8 * (i + 1)}), wl,
                          study="s", created_at=now + i, prediction=prediction)  # fmt: skip
            store.add(trial)
            store.save_result(trial, {"output_throughput": tput, "completed": 32},
                              server={"mean_itl_ms": itl})  # fmt: skip
            made.append(store.get(trial.id))
    return made


def test_the_report_plots_each_known_forecast_against_its_measurement(tmp_path: Path) -> None:
    db = tmp_path / "trials.db"
    trials = _fill(db)
    with TrialStore(db) as store:
        data = collect(Study(store, "s"))
    scores = [s for t in trials if (s := score_of(t)) is not None]
    assert len(scores) == 2 == len(data.forecasts)  # the unknown forecast is not plotted
    for point, score in zip(data.forecasts, scores, strict=True):
        assert point.predicted == score.forecast.output_throughput
        assert (point.low, point.high) == score.forecast.throughput_interval()
        assert point.measured == score.output_throughput and point.inside == score.inside
    assert [p.inside for p in data.forecasts] == [True, False]  # 1,800 is outside 2,700–3,300
    said = record_text(record_of(trials))
    assert data.forecast_record == said and said.startswith("forecasts made before each run: 2")
    written = write_report(tmp_path / "out", study="s", store_path=db)
    page, md = written.html.read_text(), written.markdown.read_text()
    section = page[page.index("<h2>Forecast vs measured</h2>") :]
    assert html.escape(said) in section and section.index("<svg") < section.index("<h2>", 5)
    assert _md(said) in md
    assert "| 2,000 | 1,600–2,400 | 2,100 | -5% | yes |" in md
    assert "| 3,000 | 2,700–3,300 | 1,800 | +67% | **no** |" in md


def test_a_study_without_known_forecasts_has_no_forecast_section(tmp_path: Path) -> None:
    db = tmp_path / "trials.db"
    with TrialStore(db) as store:
        trial = Trial(EngineConfig("org/m"), Workload(), study="s")
        store.add(trial)
        store.save_result(trial, {"output_throughput": 100.0, "completed": 32})
    written = write_report(tmp_path / "out", study="s", store_path=db)
    assert "Forecast vs measured" not in written.html.read_text()
    assert "Forecast vs measured" not in written.markdown.read_text()
