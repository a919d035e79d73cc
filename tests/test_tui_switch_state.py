"""A switch says on or off in words, not by colour alone (issue 32).

Every BOOL knob with a known default is a Switch; beside it a label reads the
state, and it follows both the user's toggle and a config loaded from outside
(a preset, a fix), so the word and the switch never disagree.
"""

from __future__ import annotations

from textual.widgets import Label, Switch

from tests.support.tui_harness import services, settle
from tui.app import TunelabApp
from tui.widgets.knob_panel import KnobPanel, KnobRow
from tuner.knobs import KNOBS, ValueType
from tuner.switches import switch_state


def _state(row: KnobRow) -> str:
    return str(row.query_one(".switch-state", Label).render())


async def test_every_switch_says_its_state_in_words() -> None:
    app = TunelabApp(services=services())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        panel = app.main.query_one(KnobPanel)
        switches = [k for k in KNOBS if k.type is ValueType.BOOL and k.default is not None]
        assert switches, "the catalogue has switch knobs"
        for knob in switches:
            row = panel.row(knob.key)
            control = row.control
            assert isinstance(control, Switch)
            assert _state(row) == ("on" if control.value else "off"), knob.key
        row = panel.row(switches[0].key)
        control = row.control
        assert isinstance(control, Switch)
        before = control.value
        control.toggle()
        await pilot.pause()
        assert _state(row) == ("off" if before else "on")
        assert switch_state(str(app.session.config.get(switches[0].key))) is (not before)
        row.set_value(before)  # a config from outside (a preset, a fix)
        await pilot.pause()
        assert _state(row) == ("on" if before else "off") and control.value == before
