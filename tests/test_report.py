"""The study report: its numbers are the core's, it escapes hostile text, and it opens offline.

The store is filled through its own API with finished trials (results in
vLLM's key names, as the runner saves them); every figure the report shows
is checked against the core function that owns it — the A/B report, the
winner, the launch-script renderer — never against a copy of their logic.
The page is then opened in headless Chromium (Debian's package, installed by
``scripts/setup-venv``) with every network request recorded: none may leave
the page, and the console must stay free of errors. A screenshot is kept
under ``test-artifacts/``.
"""

from __future__ import annotations

import html
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.export.script import render_script
from tuner.lab.study import Study
from tuner.report import collect, write_report
from tuner.report.markdown import _md
from tuner.report.write import ReportError
from tuner.studies.ab import build_report
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
HOSTILE = "<script>alert(1)</script>|`x`[/]"


def _results(throughput: float, ttft: float, itl: float) -> dict[str, object]:
    return {
        "completed": 32,
        "failed": 0,
        "output_throughput": throughput,
        "request_throughput": throughput / 64,
        "median_ttft_ms": ttft * 0.8,
        "p99_ttft_ms": ttft,
        "median_itl_ms": itl * 0.7,
        "p99_itl_ms": itl,
        "p99_e2el_ms": ttft + 64 * itl,
    }


def _fill(store: TrialStore, study: str) -> list[Trial]:
    """An A/B (3+3) and a 3-point sweep, results drawn around known means."""
    rng = random.Random(7)
    base = EngineConfig(model="org/model", engine={"max-num-seqs": 8})
    wl = Workload(input_len=128, output_len=64, num_prompts=32, concurrency=8)
    made: list[Trial] = []
    now = time.time()

    def add(config: EngineConfig, results: dict[str, object], **kw: object) -> None:
        trial = Trial(config, wl, study=study, created_at=now + len(made), **kw)  # type: ignore[arg-type]
        store.add(trial)
        store.save_result(trial, results)
        made.append(trial)

    for rep in range(3):
        add(base, _results(1000 * rng.uniform(0.97, 1.03), 40, 9), arm="A", repeat=rep)
        b = base.with_values({"max-num-seqs": 64, "VLLM_HOSTILE": HOSTILE})
        add(b, _results(1500 * rng.uniform(0.97, 1.03), 55, 8), arm="B", repeat=rep)
    for value in (16, 32, 64):
        for rep in range(2):
            add(
                base.with_values({"max-num-seqs": value}),
                _results(900 + 10 * value * rng.uniform(0.95, 1.05), 30 + value / 2, 10),
                repeat=rep,
                tags={"kind": "sweep", "knob": "max-num-seqs", "value": value},
            )
    return made


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, list[Trial]]:
    db = tmp_path / "trials.db"
    with TrialStore(db) as store:
        trials = _fill(store, "study-1")
    return db, trials


def test_report_numbers_are_the_cores(filled: tuple[Path, list[Trial]], tmp_path: Path) -> None:
    db, _ = filled
    written = write_report(tmp_path / "out", study="study-1", store_path=db)
    page = written.html.read_text()
    md = written.markdown.read_text()
    with TrialStore(db) as store:
        study = Study(store, "study-1")
        stored = study.trials()
        chosen, why = study.export_choice()
        baseline = study.baseline()
        data = collect(study)
    ab = build_report([t for t in stored if t.arm], study="study-1", objective="output_throughput")
    assert ab.verdict.value == "B better"  # 1500 vs 1000 with 3 % noise
    assert html.escape(ab.summary()) in page
    assert _md(ab.summary()) in md  # the summary, Markdown-escaped (tuner.report.markdown)
    assert chosen is not None and baseline is not None
    assert chosen.id in page and chosen.id in md
    assert html.escape(why) in page
    assert html.escape(render_script(chosen.config, header=[])) in page
    assert f"Baseline ★: trial <code>{baseline.trial.id}</code>" in page
    for t in stored:
        assert f"{t.results['output_throughput']:.4g}" in page  # type: ignore[index]
        assert t.short_id in md
    assert [c.values for c in data.sweeps] == [["16", "32", "64"]]
    assert [len(s) for s in data.sweeps[0].samples] == [2, 2, 2]
    assert "max-num-seqs</code>: 8 → 64" in page  # B's change from the baseline (arm A)


def test_hostile_text_is_escaped(filled: tuple[Path, list[Trial]], tmp_path: Path) -> None:
    db, _ = filled
    written = write_report(tmp_path / "out", study="study-1", store_path=db)
    page = written.html.read_text()
    assert "<script>" not in page
    assert html.escape(HOSTILE) in page
    md = written.markdown.read_text()
    for line in md.splitlines():
        if "VLLM_HOSTILE" in line:
            assert line.count("|") - line.count("\\|") == 8  # the cell did not split the row


def test_unknown_study_is_a_message_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(ReportError) as err:
        write_report(tmp_path / "out", study="nope", store_path=tmp_path / "t.db")
    assert "has no trials" in str(err.value)
    assert not (tmp_path / "out" / "report.html").exists()


def test_cli_writes_both_files(filled: tuple[Path, list[Trial]], tmp_path: Path) -> None:
    db, _ = filled
    out = tmp_path / "cli-out"
    done = subprocess.run(
        [sys.executable, "-m", "tui", "report", "--store", str(db), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "report.html").stat().st_size > 1000
    assert "study-1" in (out / "report.md").read_text()


def test_report_opens_offline_in_chromium(filled: tuple[Path, list[Trial]], tmp_path: Path) -> None:
    assert shutil.which(CHROMIUM), (
        "Debian's chromium is missing: scripts/setup-venv installs it (apt-get install chromium)"
    )
    from playwright.sync_api import sync_playwright

    db, _ = filled
    written = write_report(tmp_path / "out", study="study-1", store_path=db)
    url = written.html.resolve().as_uri()
    requests: list[str] = []
    errors: list[str] = []
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, wait_until="load")
        svgs = page.locator("svg").count()
        heading = page.locator("h1").inner_text()
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        browser.close()
    assert requests == [url], f"the report asked the network for {requests[1:]}"
    assert errors == []
    assert heading == "tunelab report — study-1"
    assert svgs >= 4  # forest plot, sweep curve, two Pareto planes
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_requested_vs_effective_mismatches_are_listed(tmp_path: Path) -> None:
    from tuner.engine.effective import EffectiveConfig, Mismatch

    mismatch = Mismatch("cudagraph-mode", "FULL", "NONE", "Cudagraph is disabled on CPU")
    db = tmp_path / "t.db"
    cfg = EngineConfig(model="org/model", engine={"cudagraph-mode": "FULL"})
    with TrialStore(db) as store:
        trial = Trial(cfg, Workload(input_len=8, output_len=8, num_prompts=4), study="m")
        trial.effective = EffectiveConfig(mismatches=(mismatch,)).to_dict()
        store.add(trial)
        store.save_result(trial, _results(100, 10, 5))
    written = write_report(tmp_path / "out", study="m", store_path=db)
    assert html.escape(mismatch.message()) in written.html.read_text()


def test_each_sampled_trial_gets_its_gpu_timeline(tmp_path: Path) -> None:
    """The timeline is drawn from the stored window's series, per GPU; no series, no section."""
    db = tmp_path / "trials.db"
    wl = Workload(input_len=128, output_len=64, num_prompts=32, concurrency=8)
    series = [
        [0.0, 410.5, 90.0, 40 * 2**30],
        [0.5, 650.0, 99.0, 41 * 2**30],
        [1.0, None, 97.0, None],
    ]
    telemetry = {"gpus": [{"index": 0, "series": series}, {"index": 3, "series": series[:2]}]}
    with TrialStore(db) as store:
        sampled = Trial(EngineConfig(model="org/m"), wl, study="tl", created_at=1.0)
        store.add(sampled)
        store.save_result(sampled, _results(1000, 40, 9), telemetry=telemetry)
        old = Trial(
            EngineConfig(model="org/m", engine={"max-num-seqs": 4}), wl, study="tl", created_at=2.0
        )
        store.add(old)
        store.save_result(old, _results(900, 40, 9), telemetry={"gpus": [{"index": 0}]})
        data = collect(Study(store, "tl"))
    rows = {r.trial.id: r for r in data.rows}
    gpus = rows[sampled.id].timelines
    assert [g.index for g in gpus] == [0, 3]
    assert gpus[0].seconds == [0.0, 0.5, 1.0]
    assert gpus[0].power_w == [410.5, 650.0, None]  # the gap stays a gap
    assert gpus[0].vram_gib == [40.0, 41.0, None]
    assert rows[old.id].timelines == []  # stored without a series: no timeline, no error
    page = write_report(tmp_path / "out", study="tl", store_path=db).html.read_text()
    block = page[page.index(f"id='timeline-{sampled.id}'") :]
    assert "2 GPU(s), 3 samples, peak 650 W" in block[:300]
    assert "<svg" in block[: block.index("</details>")]
    assert f"timeline-{old.id}" not in page
