"""``tunelab gpus``: the no-GPU message on this machine, tables and JSON on fake nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.fakes import fake_amdsmi, fake_pynvml
from tuner.cli import gpus as gpus_cmd
from tuner.telemetry import select as sel
from tuner.telemetry.amd import AmdSmiBackend
from tuner.telemetry.base import BackendUnavailable
from tuner.telemetry.nvidia import NvmlBackend

NO_NATIVE = not any(
    Path(p).exists() for p in ("/opt/rocm/lib/libamd_smi.so", "/dev/kfd", "/dev/nvidiactl")
)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.setenv("COLUMNS", "220")
    app = typer.Typer()
    gpus_cmd.register(app)

    @app.callback()
    def main() -> None:  # keeps "gpus" a sub-command, as in tunelab's app
        return None

    return app


def _amd_unavailable() -> AmdSmiBackend:
    raise BackendUnavailable("amdsmi: no AMD GPU found (test)")


@pytest.mark.skipif(not NO_NATIVE, reason="a GPU stack is installed here")
def test_no_gpu_here_says_so_and_why(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["gpus"])
    assert result.exit_code == 0, result.output
    assert "No GPU visible" in result.output
    assert "amdsmi: libamd_smi.so not found" in result.output
    assert "NVML: libnvidia-ml.so.1 not found" in result.output


@pytest.mark.skipif(not NO_NATIVE, reason="a GPU stack is installed here")
def test_no_gpu_json_and_forced_backend(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["gpus", "--json"])
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["backend"] == "none" and data["gpus"] == []
    assert len(data["reasons"]) == 2
    forced = CliRunner().invoke(cli, ["gpus", "--backend", "nvidia"])
    assert forced.exit_code == 1  # asked for NVIDIA, there is none: an error
    assert "NVML: libnvidia-ml.so.1 not found" in forced.output


def test_bad_backend_value(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["gpus", "--backend", "intel"])
    assert result.exit_code == 2


def test_table_on_fake_mi355x(cli: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        sel.FACTORIES, "amd", lambda: AmdSmiBackend(fake_amdsmi.make_module("mi355x"))
    )
    result = CliRunner().invoke(cli, ["gpus"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "amdsmi: 8 AMD GPUs" in out
    assert "AMD Instinct MI355X" in out and "gfx950" in out
    assert "1012/1400" in out  # W, from socket_power and a µW power_limit
    assert "N/A/71/62" in out  # no edge sensor
    assert "264.0/288.0" in out
    assert "N/A/288.0" in out  # GPU 6's UINT32_MAX VRAM-used sentinel
    assert "AMDSMI_STATUS_DRM_ERROR" in out  # GPU 5, alone
    assert "SPX/NPS1" in out
    assert "9100" in out and "vllm" in out  # process table


def test_json_on_fake_h100(cli: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sel.FACTORIES, "amd", _amd_unavailable)
    monkeypatch.setitem(sel.FACTORIES, "nvidia", lambda: NvmlBackend(fake_pynvml.make_module()))
    result = CliRunner().invoke(cli, ["gpus", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["backend"] == "nvidia"
    assert [g["index"] for g in data["gpus"]] == list(range(8))
    assert data["gpus"][0]["power_w"] == pytest.approx(652.431)
    assert data["gpus"][1]["gfx_activity"] is None
    assert data["gpus"][7]["error"].startswith("NVML:")


def test_watch_json_streams_lines(cli: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        sel.FACTORIES, "amd", lambda: AmdSmiBackend(fake_amdsmi.make_module("mi300x"))
    )
    result = CliRunner().invoke(
        cli, ["gpus", "--watch", "--json", "--interval", "0.1", "--count", "3"]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert len(lines) == 3
    assert all(len(line["gpus"]) == 8 for line in lines)
    assert lines[-1]["gpus"][2]["processes"] is None


def test_watch_table_refreshes_and_stops(cli: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = fake_amdsmi.make_module("mi300x")
    monkeypatch.setitem(sel.FACTORIES, "amd", lambda: AmdSmiBackend(mod))
    result = CliRunner().invoke(cli, ["gpus", "--watch", "--interval", "0.1", "--count", "3"])
    assert result.exit_code == 0, result.output
    assert "AMD Instinct MI300X" in result.output
    assert mod.calls.count(("amdsmi_get_gpu_vram_usage", 0)) >= 2  # read more than once
    assert mod.shutdown_count == 1  # library released on exit
