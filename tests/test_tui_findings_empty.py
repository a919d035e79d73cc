"""An empty findings list says what the rules could judge (issue 32).

The first screen said "the rules see nothing wrong" before there was a target or
a model to judge against. The sentence is the core's
(tuner.lab.checks.no_findings_text), shown alike by the TUI's Findings panel and
``tunelab check``; these tests hold the screen to the core's answer while
introspection is still running and once it has answered.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from typer.testing import CliRunner

from tests.support.tui_harness import recorded_vllm_info, services, settle, wait_for
from tui.app import TunelabApp
from tui.widgets.findings_panel import FindingsPanel
from tuner.cli.app import app as cli_app
from tuner.cli.app import register_all
from tuner.lab.checks import no_findings_text
from tuner.rules import Target

register_all(cli_app)


def test_the_sentence_names_what_the_rules_lack() -> None:
    known = Target(vllm_version="0.32.0", platform="cpu")
    assert no_findings_text(object(), known) == (  # type: ignore[arg-type]
        "No findings: the rules see nothing wrong with this config."
    )
    lacking = no_findings_text(None, Target())
    assert lacking.startswith("No findings, but without")
    assert "the vLLM version and platform" in lacking and "the model's analysis" in lacking
    assert "nothing wrong" not in lacking
    assert "vLLM version" not in no_findings_text(None, known)


def _panel_text(app: TunelabApp) -> str:
    return str(app.main.query_one(FindingsPanel).render())


async def test_the_first_screen_says_what_the_rules_wait_for_then_judges() -> None:
    gate = threading.Event()

    def slow_introspection() -> Any:
        gate.wait(30)
        return recorded_vllm_info()

    svc = dataclasses.replace(services(), introspect=slow_introspection)
    app = TunelabApp(services=svc)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.main.is_mounted, what="the main screen")
        await pilot.pause(0.3)
        session = app.session
        # The demo config has no finding while the target is still unknown.
        assert session.findings == [] and session.target.vllm_version is None
        shown = _panel_text(app)
        assert shown == no_findings_text(session.model_info, session.target)
        assert shown.startswith("No findings, but without the vLLM version and platform")
        gate.set()
        await settle(pilot)
        await wait_for(pilot, lambda: session.target.vllm_version is not None, what="target")
        app.main.recheck()
        await pilot.pause()
        assert session.findings == [], session.findings
        assert _panel_text(app) == no_findings_text(session.model_info, session.target)
        assert "vLLM version" not in _panel_text(app)


def test_check_without_a_model_says_the_model_rules_were_silent() -> None:
    ran = CliRunner().invoke(
        cli_app,
        ["check", "--platform", "cpu", "--vllm-version", "0.32.0", "--set", "max-num-seqs=64"],
        env={"COLUMNS": "200"},
    )
    assert ran.exit_code == 0, ran.output
    said = no_findings_text(None, Target(vllm_version="0.32.0", platform="cpu"))
    assert said.startswith("No findings, but without the model's analysis")
    assert said in " ".join(ran.output.split())
