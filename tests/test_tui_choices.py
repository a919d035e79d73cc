"""Choice lists follow the target vLLM and platform (issue 13, B7).

The backend dropdown listed all 67 names the catalogue knows; vLLM 0.32 has
46, and on CPU most of them do not run. Checked against the core's own
answers (``choices_for`` for the version, ``backend_platforms`` per name).
"""

from __future__ import annotations

from typing import Any

from textual.widgets import Select

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.widgets.knob_panel import KnobPanel
from tuner import knobs as catalogue
from tuner.knobs.value_sets import backend_platforms


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
        elsewhere = {
            b for b in expected if (p := backend_platforms(b)) is not None and "cpu" not in p
        }
        assert elsewhere and "TORCH_SDPA" not in elsewhere
        for prompt, value in options:
            assert prompt.startswith("⊘") == (value in elsewhere), (prompt, value)
        # The marked names come after every name that runs here.
        marks = [value in elsewhere for _p, value in options]
        assert marks == sorted(marks)
        # Still selectable (a preset for another node), and the value is the plain name.
        select.value = "FLASH_ATTN"
        await pilot.pause()
        assert app.session.config.get("attention-backend") == "FLASH_ATTN"
