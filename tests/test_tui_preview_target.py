"""A target switch in the TUI (issue 32): preview another node's findings from a laptop.

``tunelab tui --gpu MI300X`` (or ``g`` then ``MI300X``) makes the rules judge the
config for that node: the header says it is a preview, the ⊘ marks and findings
follow the previewed target (the core's answer for it, tuner.lab.checks), and a
run still runs on this node and is judged by this node's target. ``this node``
ends the preview; a GPU tunelab does not know is a message, not a crash.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.support.tui_harness import services, settle, wait_for
from tui import cli as tui_cli
from tui.app import TunelabApp
from tui.widgets.knob_panel import KnobPanel
from tui.widgets.status_bar import StatusBar
from tuner.lab import checks
from tuner.lab.target import PreviewError, parse_preview, preview, preview_label

AITER = "VLLM_ROCM_USE_AITER"


def test_the_dialogs_text_reads_as_check_gpu_does() -> None:
    mi300x = parse_preview("MI300X")
    assert mi300x is not None and (mi300x.platform, mi300x.gpu_name, mi300x.gpus) == (
        "rocm",
        "MI300X",
        8,
    )
    h100 = parse_preview("0.32.0 4xH100")
    assert h100 is not None and (h100.platform, h100.gpus, h100.vllm_version) == (
        "cuda",
        4,
        "0.32.0",
    )
    assert parse_preview("this node") is None and parse_preview("  ") is None
    with pytest.raises(PreviewError):
        parse_preview("MI300X H100")
    with pytest.raises(PreviewError):
        preview(None, None, None)
    label = preview_label(mi300x)
    assert label.startswith("preview: vLLM 0.32.0 on ROCM") and "(not this node)" in label


def _header(app: TunelabApp) -> str:
    return app.main.query_one(StatusBar).vllm


def _aiter_applies(app: TunelabApp) -> bool:
    return app.main.query_one(KnobPanel).row(AITER).availability.ok


async def test_a_preview_judges_for_the_other_node_and_runs_stay_here() -> None:
    target = preview("MI300X")
    app = TunelabApp(services=services(), preview=target)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: app.session.vllm_info is not None, what="introspection")
        await pilot.pause()
        session = app.session
        assert _header(app) == preview_label(target)
        assert session.rules_target == target and session.target.platform == "cpu"
        assert session.findings == checks.findings(
            session.config, session.model_info, target, session.workload, session.invalid
        )
        assert _aiter_applies(app)  # an AITER flag means something on MI300X
        assert app.run_options().target == session.target  # runs are judged by this node

        # `g` -> "this node": the rules judge the CPU node again.
        await pilot.press("g")
        await pilot.pause()
        field = app.screen.query_one("#target-spec", Input)
        assert field.value == "8xMI300X 0.32.0"
        field.value = "this node"
        await pilot.press("enter")
        await pilot.pause()
        assert session.preview is None and session.rules_target == session.target
        assert _header(app).startswith("vLLM 0.32.0 (CPU)")
        assert not _aiter_applies(app)  # ⊘ on the CPU engine

        # A GPU tunelab does not know: a message, the state unchanged.
        notes: list[str] = []
        app.notify = lambda message, **_k: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.press("g")
        await pilot.pause()
        app.screen.query_one("#target-spec", Input).value = "MI999"
        await pilot.press("enter")
        await pilot.pause()
        assert session.preview is None and any("MI999" in n for n in notes), notes


def test_tui_gpu_that_tunelab_does_not_know_is_a_usage_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        tui_cli.main(["tui", "--gpu", "MI999"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "MI999" in err and "MI300X" in err and "Traceback" not in err
