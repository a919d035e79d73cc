"""Every --preset takes a file path or the name of a shipped/user preset."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.cli.app import register_all
from tuner.cli.options import make_config
from tuner.export.catalog import resolve_preset, shipped_dir
from tuner.export.errors import PresetError

app = register_all(typer.Typer())


def test_run_config_from_a_shipped_name() -> None:
    config = make_config("run", "cpu-demo", None, None)
    assert config.engine  # the cpu-demo preset's engine arguments


def test_a_file_in_cwd_with_a_shipped_name_is_named_in_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cpu-demo").write_text("not a preset")
    found = resolve_preset("cpu-demo")
    assert found.path.parent == shipped_dir()
    assert "./cpu-demo" in found.note
    assert resolve_preset("./cpu-demo").path == Path("cpu-demo")


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(PresetError, match=r"known: .*cpu-demo"):
        resolve_preset("no-such-preset")


def test_export_preset_by_name_writes_files(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["export", "--preset", "gpt-oss", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "gpt-oss.docker.sh",
        "gpt-oss.sh",
        "gpt-oss.toml",
        "gpt-oss.yaml",
    ]
