"""Pilot tests of the TUI's other actions: Stop, Sweep, the palette, themes, presets, models.

Runs use the ENGINE DOUBLE (``tests/support/study_engine_double.py``), whose
``DOUBLE_START_LOG`` records each engine's pid, so Stop can be checked
against the real process table.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from textual.message import Message
from textual.widgets import Input, OptionList

from tests.support.tui_harness import REPO, services, settle, wait_for
from tui.app import TunelabApp
from tui.commands import ACTIONS, TunelabCommands
from tui.messages import JobFinished, RunEvent
from tui.screens.fix_picker import FixPicker
from tui.screens.model_picker import ModelPicker
from tui.screens.sweep import SweepDialog
from tui.widgets.findings_panel import FindingsPanel
from tui.widgets.knob_panel import KnobPanel
from tui.widgets.status_bar import StatusBar
from tuner.lab.checks import INVALID_RULE
from tuner.model.cache import cached_models
from tuner.rules import Severity


def _finished(seen: list[Message]) -> list[JobFinished]:
    return [m for m in seen if isinstance(m, JobFinished)]


async def test_stop_kills_the_engine_and_marks_the_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "starts.jsonl"
    monkeypatch.setenv("DOUBLE_START_LOG", str(log))
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "400", "num_prompts": "400", "concurrency": "1"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: app.main.query_one(StatusBar).engine_state == "measuring", 30)
        pid = json.loads(log.read_text().splitlines()[0])["pid"]
        assert psutil.pid_exists(pid)
        # Editing goes on while the engine measures; the running trial keeps its own config.
        app.main.query_one(KnobPanel).row("max-num-seqs").control.value = "16"  # type: ignore[union-attr]
        await pilot.pause()
        assert app.session.config.engine["max-num-seqs"] == 16
        assert app.main.query_one(StatusBar).engine_state == "measuring"
        await pilot.press("s")
        await wait_for(pilot, lambda: bool(_finished(seen)), 30, "the stop")
        done = _finished(seen)[-1]
        assert not done.ok and "stopped" in done.summary
        assert app.main.query_one(StatusBar).engine_state == "idle"
        assert not app.jobs.active
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"engine double {pid} still alive after Stop"
        time.sleep(0.1)
    from tuner.trials.store import TrialStore

    with TrialStore() as store:
        stopped = store.list(study="tui")[-1]
    assert str(stopped.status) == "interrupted"
    assert stopped.config.engine["max-num-seqs"] == 64


async def test_sweep_of_the_focused_knob_runs_each_value() -> None:
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "8", "num_prompts": "8", "concurrency": "4"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        await pilot.pause()
        app.main.query_one(KnobPanel).row("enforce-eager").control.focus()
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, SweepDialog)
        box = app.screen.query_one(Input)
        assert box.value == "enforce-eager=false,true"  # suggested from the focused knob
        box.value = "max-num-seqs=2,8"
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(_finished(seen)), 90, "the sweep")
        done = _finished(seen)[-1]
        assert done.kind == "sweep" and done.ok, done.summary
        assert [p.value for p in done.result.steps[0].points] == [2, 8]
        values = sorted(t.config.engine["max-num-seqs"] for t in app.session.trials)
        assert values == [2, 8]
        from tuner.trials import events as ev

        trials = {
            m.event.trial_id
            for m in seen
            if isinstance(m, RunEvent) and isinstance(m.event, ev.TrialStage)
        }
        assert len(trials) == 2


async def test_every_action_is_bound_and_in_the_palette() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        keys = {b.action: b.key for b in app.BINDINGS}  # type: ignore[union-attr]
        for spec in ACTIONS:
            assert keys[spec.action] == spec.key
            assert hasattr(app, f"action_{spec.action}"), spec.action
        provider = TunelabCommands(app.screen)
        found = [hit async for hit in provider.discover()]
        assert len(found) == len(ACTIONS)
        hits = [hit async for hit in provider.search("export")]
        assert hits and "Export" in str(hits[0].match_display)
        await hits[0].command()
        await pilot.pause()
        assert type(app.screen).__name__ == "ExportScreen"


async def test_theme_toggles_between_light_and_dark() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        dark = app.current_theme.dark
        app.main.query_one("#wl-input_len", Input).focus()
        await pilot.press("escape")  # leave the text field: single-key actions work again
        await pilot.press("d")
        assert app.current_theme.dark is not dark
        await pilot.press("d")
        assert app.current_theme.dark is dark


async def test_preset_and_model_start_options() -> None:
    app = TunelabApp(model=None, preset=REPO / "presets" / "cpu-demo.toml", services=services())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: bool(app.session.config.model), what="the preset")
        assert app.session.config.engine["gpu-memory-utilization"] == 0.3
        assert app.session.model_label == "tunelab:demo"

    bad = TunelabApp(preset=REPO / "no-such-preset.toml", services=services())
    async with bad.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.5)
        await wait_for(pilot, lambda: bool(bad._notifications), what="the error toast")
        text = " ".join(str(n.message) for n in bad._notifications)
        assert "Cannot load the start config" in text and "no-such-preset.toml" in text


async def test_model_picker_offers_the_demo_and_the_hf_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    (tmp_path / "empty-hf-cache").mkdir()
    app = TunelabApp(services=services())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, ModelPicker)
        said = cached_models().note  # the core's sentence: an empty cache is no exception
        await wait_for(
            pilot, lambda: str(app.screen.query_one("#picker-note").render()) == said, 10
        )
        assert "CacheNotFound" not in said
        options: Any = app.screen.query_one(OptionList)
        assert options.get_option_at_index(0).id == "tunelab:demo"
        options.focus()
        options.highlighted = 0
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.main
        assert app.session.model_label == "tunelab:demo"


def test_run_panel_result_line_warns_when_responses_came_in_one_piece() -> None:
    from types import SimpleNamespace

    from tui.screens.main import result_line

    results = {"output_throughput": 812.4, "p99_ttft_ms": 41.0, "p99_itl_ms": 9.1}
    streamed = SimpleNamespace(
        short_id="1a2b3c4d", is_probe=False, results={**results, "tunelab": {}}
    )
    assert result_line(streamed) == (
        "trial 1a2b3c4d: 812 tok/s · TTFT p99 41.0 ms · ITL p99 9.1 ms"
    )
    streamed.results["tunelab"]["one_chunk_fraction"] = 0.49
    assert "one piece" not in result_line(streamed)
    starved = SimpleNamespace(
        short_id="5e6f7a8b",
        is_probe=False,
        results={**results, "tunelab": {"one_chunk_fraction": 0.83}},
    )
    assert result_line(starved).endswith(
        "· ⚠ 83% of responses arrived in one piece: TTFT/ITL show a starved server"
    )


def _set_text(app: TunelabApp, key: str, text: str) -> None:
    control = app.main.query_one(KnobPanel).row(key).control
    assert isinstance(control, Input)
    control.value = text


async def test_invalid_knob_text_is_an_error_that_blocks_run_and_stays_shown() -> None:
    """B1: `abc` in max-num-seqs must not silently run without the knob."""
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await settle(pilot)
        _set_text(app, "max-num-seqs", "abc")
        await pilot.pause()
        invalid = [f for f in app.session.findings if f.rule == INVALID_RULE]
        assert [f.knobs for f in invalid] == [("max-num-seqs",)]
        assert invalid[0].severity is Severity.ERROR
        assert "max-num-seqs" in str(app.main.query_one(FindingsPanel).render())
        await pilot.press("escape")
        await pilot.press("r")
        await pilot.pause()
        assert not app.jobs.active and not _finished(seen)  # Run refused
        # A re-render (a fix elsewhere, a model change) keeps the user's text and its mark.
        app.main.refresh_all()
        await pilot.pause()
        field = app.main.query_one(KnobPanel).row("max-num-seqs").control
        assert isinstance(field, Input)
        assert field.value == "abc" and field.has_class("-invalid")
        assert any(f.rule == INVALID_RULE for f in app.session.findings)
        # Corrected: the error is gone and the value is the one typed.
        _set_text(app, "max-num-seqs", "32")
        await pilot.pause()
        assert not any(f.rule == INVALID_RULE for f in app.session.findings)
        assert app.session.config.engine["max-num-seqs"] == 32


async def test_f_is_offered_only_with_a_fix_and_several_fixes_are_picked() -> None:
    """B2: no `press f` without a fix; with two fixes the user picks which one."""
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.session.config = app.session.config.with_values(
            {"attention-backend": "FLASH_ATTN_VLLM_V1"}
        )
        app.main.refresh_all()
        await pilot.pause()
        errors = [f for f in app.session.findings if f.severity is Severity.ERROR]
        assert errors and not any(f.fix for f in errors)
        panel = app.main.query_one(FindingsPanel)
        assert "press f" not in str(panel.border_subtitle)
        assert app.check_action("fix", ()) is False  # hidden from the footer
        app.session.config = app.session.config.with_values(
            {"attention-backend": None, "max-num-seqs": 2, "gpu-memory-utilization": 0.99}
        )
        app.main.refresh_all()
        await pilot.pause()
        fixes = [f.fix for f in app.session.findings if f.fix]
        assert {"max-num-seqs": 8} in fixes and {"gpu-memory-utilization": 0.95} in fixes
        assert app.check_action("fix", ())
        await pilot.press("escape")
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FixPicker)
        options = app.screen.query_one(OptionList)
        wanted = next(
            i
            for i, f in enumerate(app.screen.findings)
            if f.fix == {"gpu-memory-utilization": 0.95}
        )
        options.highlighted = wanted
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.main
        # Only the chosen fix was applied.
        assert app.session.config.engine["gpu-memory-utilization"] == 0.95
        assert app.session.config.engine["max-num-seqs"] == 2


async def test_the_workload_panel_takes_what_the_cli_takes() -> None:
    """`infinity` is a rate in `tunelab run --request-rate` and so in the panel (one parser)."""
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.main.query_one("#wl-request_rate", Input).value = "Infinity"
        await pilot.pause()
        assert app.session.workload is not None, app.session.workload_error
        assert app.session.workload.request_rate == float("inf")
        app.main.query_one("#wl-request_rate", Input).value = "fast"
        await pilot.pause()
        assert app.session.workload is None
        assert "rate 'fast' is not a number" in str(app.session.workload_error)


async def test_capacity_key_searches_the_current_config_and_shows_the_cores_answer(
    tmp_path: Path,
) -> None:
    seen: list[Message] = []
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await settle(pilot)
        for name, text in {"output_len": "8", "num_prompts": "4", "concurrency": "4"}.items():
            app.main.query_one(f"#wl-{name}", Input).value = text
        app.main.query_one(KnobPanel).row("max-num-seqs").control.value = "2"  # type: ignore[union-attr]
        await pilot.pause()
        from tui.screens.capacity import CapacityDialog

        # A typo is a notification with the fix; nothing starts.
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, CapacityDialog)
        box = app.screen.query_one(Input)
        assert box.value == "p99_ttft_ms<=500"  # vLLM's spelling, pre-filled
        box.value = "ttft:500"
        await pilot.press("enter")
        await pilot.pause()
        assert app.jobs.current is None and not _finished(seen)
        assert any("p99_ttft_ms<=500" in n.message for n in app._notifications)

        await pilot.press("k")
        await pilot.pause()
        app.screen.query_one(Input).value = "p99_ttft_ms<=60"
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(_finished(seen)), 120, "the capacity search")
        done = _finished(seen)[-1]
        assert done.kind == "capacity" and done.ok, done.summary
        report = done.result
        # The Run panel shows the core's answer, whole.
        assert str(app.main.query_one("#run-figures").render()) == report.summary()
        assert report.slo == "p99_ttft_ms<=60" and len(report.launches) == 3
        assert report.interval is not None and report.interval.mean >= 1
        # Every probe is a trial of the session's study, at max-num-seqs 2, in the results.
        probes = [p.trial_id for lc in report.launches for p in lc.probes]
        by_id = {t.id: t for t in app.session.trials}
        assert set(probes) <= set(by_id)
        assert all(by_id[i].config.engine["max-num-seqs"] == 2 for i in probes)
        assert all(by_id[i].tags["kind"] == "capacity" for i in probes)
