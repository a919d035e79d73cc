"""Choice lists follow the target vLLM and platform (issue 13, B7; issue 32).

The backend dropdown listed all 67 names the catalogue knows; vLLM 0.32 has
46, and on CPU most of them do not run; and TORCH_SDPA, cudagraph FULL were
offered without a word although vLLM's CPU platform runs CPU_ATTN and NONE
whatever is asked. Checked against the core's own answers (``choices_for`` for
the version, ``tuner.lab.checks.value_marks`` per name, with why, and
``default_text`` for what "default" resolves to on the target).
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Select

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.widgets.knob_panel import KnobPanel
from tuner import knobs as catalogue
from tuner.knobs.value_sets import backend_platforms
from tuner.lab import checks


def _options(select: Select[Any]) -> list[tuple[str, str]]:
    return [(str(getattr(p, "plain", p)), v) for p, v in select._options if v is not Select.NULL]


async def test_backend_choices_are_the_installed_versions_with_other_platforms_marked() -> None:
    app = TunelabApp(services=services())  # recorded vLLM 0.32.0 on CPU
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        knob = catalogue.get("attention-backend")
        assert knob is not None
        expected = catalogue.choices_for(knob, "0.32.0")
        assert len(expected) < len(catalogue.choices_for(knob))  # 46 < 67: the version matters
        select = app.main.query_one(KnobPanel).row("attention-backend").control
        assert isinstance(select, Select)
        options = _options(select)
        assert sorted(v for _p, v in options) == sorted(expected)
        row = app.main.query_one(KnobPanel).row("attention-backend")
        marks = checks.value_marks(knob, expected, "0.32.0", "cpu")
        elsewhere = {
            b for b in expected if (p := backend_platforms(b)) is not None and "cpu" not in p
        }
        assert elsewhere <= set(marks)
        # vLLM's CPU platform runs CPU_ATTN whatever is asked: TORCH_SDPA is marked, with why.
        assert "TORCH_SDPA" in marks and "CPU_ATTN" not in marks
        assert '"Cannot use TORCH_SDPA backend on CPU."' in marks["TORCH_SDPA"]
        # The help names every ⊘ value with its reason, each reason once (grouped_marks).
        for line in checks.grouped_marks(marks):
            assert f"[{line}]" in row.help_text()
        assert any(
            "TORCH_SDPA" in line and '"Cannot use … backend on CPU."' in line
            for line in checks.grouped_marks(marks)
        )
        for prompt, value in options:
            assert prompt.startswith("⊘") == (value in marks), (prompt, value)
        # The marked names come after every name that runs here.
        order = [value in marks for _p, value in options]
        assert order == sorted(order)
        # cudagraph-mode: "default" is what vLLM resolves on CPU, and FULL is marked.
        graphs = app.main.query_one(KnobPanel).row("cudagraph-mode")
        graph_select = graphs.control
        assert isinstance(graph_select, Select)
        graph_knob = catalogue.get("cudagraph-mode")
        assert graph_knob is not None
        assert graph_select.prompt == checks.default_text(graph_knob, "0.32.0", "cpu")
        assert graph_select.prompt == "default (NONE)"
        shown = dict((v, p) for p, v in _options(graph_select))
        assert shown["FULL"].startswith("⊘") and not shown["NONE"].startswith("⊘")
        # Still selectable (a preset for another node), and the value is the plain name.
        select.value = "FLASH_ATTN"
        await pilot.pause()
        assert app.session.config.get("attention-backend") == "FLASH_ATTN"
