"""`tunelab tui --preset` follows the same code policy as every other command (issue 19).

A preset with a code-loading engine argument is refused at start-up unless the
TUI was opened with ``--allow-code``; the message names the argument.
"""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from tests.support.tui_harness import services, wait_for
from tui.app import TunelabApp
from tui.messages import ConfigLoaded

PRESET = """\
[preset]
name = "remote-code"
schema_version = 1

[target]
model = "org/model"

[engine]
trust-remote-code = true
max-num-seqs = 8
"""


async def _start(path: Path, allow_code: bool) -> ConfigLoaded:
    seen: list[Message] = []
    app = TunelabApp(preset=path, services=services(), allow_code=allow_code)
    async with app.run_test(size=(120, 36), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ConfigLoaded) for m in seen), 30, "config")
        return next(m for m in seen if isinstance(m, ConfigLoaded))


async def test_code_loading_preset_is_refused_without_allow_code(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(PRESET)
    loaded = await _start(path, allow_code=False)
    assert loaded.config is None
    assert loaded.error and "trust-remote-code" in loaded.error
    assert "1 problem" in loaded.error or "--allow-code" in loaded.error


async def test_allow_code_lets_the_preset_in(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(PRESET)
    loaded = await _start(path, allow_code=True)
    assert loaded.error is None and loaded.config is not None
    assert loaded.config.engine.get("trust-remote-code") is True
