"""`tunelab doctor`'s host check: NUMA auto-balancing must be 0 on a GPU node.

The kernel setting is read from a file whose path is injected, so every state
(0, 1, missing) is tested on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner import doctor
from tuner.cli.app import register_all
from tuner.doctor import HostState, numa_balancing_check


def test_numa_balancing_on_is_a_warning_with_the_fix(tmp_path: Path) -> None:
    f = tmp_path / "numa_balancing"
    f.write_text("1\n")
    check = numa_balancing_check(f)
    assert check.state is HostState.WARNING and check.value == "1"
    assert "kernel.numa_balancing=0" in check.message
    assert "Case 5" in check.source and "System optimization" in check.source


def test_numa_balancing_off_is_ok(tmp_path: Path) -> None:
    f = tmp_path / "numa_balancing"
    f.write_text("0\n")
    check = numa_balancing_check(f)
    assert check.state is HostState.OK and check.value == "0"


def test_missing_setting_is_not_readable(tmp_path: Path) -> None:
    check = numa_balancing_check(tmp_path / "absent")
    assert check.state is HostState.UNKNOWN and check.value is None
    assert check.message.startswith("not readable")


def test_doctor_shows_the_host_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "numa_balancing"
    f.write_text("1\n")
    monkeypatch.setattr(doctor, "NUMA_BALANCING_PATH", f)
    app = register_all(typer.Typer())
    text = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "250"})
    assert text.exit_code == 0, text.output
    assert "kernel.numa_balancing: 1" in text.output and "NUMA auto-balancing is on" in text.output
    data = json.loads(CliRunner().invoke(app, ["doctor", "--json"]).stdout)
    (host,) = data["host_checks"]
    assert host["name"] == "kernel.numa_balancing" and host["state"] == "warning"
