"""``tunelab export`` through Typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.cli import export as export_cli
from tuner.export.catalog import shipped_dir
from tuner.export.preset import load_preset


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    export_cli.register(app)

    @app.command("other")
    def _other() -> None:
        pass

    return app


def run(app: typer.Typer, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["export", *args])
    return result.exit_code, result.output


def test_export_preset_to_every_format(app: typer.Typer, tmp_path: Path) -> None:
    code, out = run(app, "--preset", "mla-deepseek", "--out", str(tmp_path))
    assert code == 0, out
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "mla-deepseek.docker.sh",
        "mla-deepseek.sh",
        "mla-deepseek.toml",
        "mla-deepseek.yaml",
    ]
    assert f"launch: {tmp_path / 'mla-deepseek.sh'}" in out
    again = load_preset(tmp_path / "mla-deepseek.toml")
    original = load_preset(shipped_dir() / "mla-deepseek.toml")
    assert again.config.config_id == original.config.config_id
    assert again.target == original.target
    assert again.provenance.sources == original.provenance.sources


def test_existing_files_need_force(app: typer.Typer, tmp_path: Path) -> None:
    assert run(app, "--preset", "awq", "--out", str(tmp_path), "--format", "sh")[0] == 0
    code, out = run(app, "--preset", "awq", "--out", str(tmp_path), "--format", "sh")
    assert code == 1
    assert "already exist" in out and "--force" in out
    assert run(app, "--preset", "awq", "--out", str(tmp_path), "--format", "sh", "--force")[0] == 0


def test_cpu_demo_export_resolves_the_model_and_round_trips(
    app: typer.Typer, tmp_path: Path
) -> None:
    code, out = run(app, "--preset", "cpu-demo", "--out", str(tmp_path), "--format", "toml,sh")
    assert code == 0, out
    from tuner.demo_model import demo_model_dir

    script = (tmp_path / "cpu-demo.sh").read_text()
    assert f"MODEL='{demo_model_dir()}'" in script
    assert 'model = "tunelab:demo"' in (tmp_path / "cpu-demo.toml").read_text()


def test_usage_errors(app: typer.Typer, tmp_path: Path) -> None:
    code, out = run(app, "--out", str(tmp_path))
    assert code == 2 and "either a TRIAL id or --preset" in out
    code, out = run(app, "t-1", "--preset", "awq")
    assert code == 2
    code, out = run(app, "--preset", "awq", "--format", "pdf", "--out", str(tmp_path))
    assert code == 2 and "unknown format 'pdf'" in out
    code, out = run(app, "--preset", str(tmp_path / "none.toml"))
    assert code == 2 and "no preset file" in out


def test_unknown_trial(app: typer.Typer, tmp_path: Path) -> None:
    code, out = run(app, "t-20260101-0001", "--out", str(tmp_path))
    assert code == 2
    assert "no trial with id 't-20260101-0001'" in out
    assert list(tmp_path.iterdir()) == []


def test_refused_env_and_allow_env(app: typer.Typer, tmp_path: Path) -> None:
    text = (
        (shipped_dir() / "awq.toml")
        .read_text()
        .replace('VLLM_USE_TRITON_AWQ = "1"', 'VLLM_USE_TRITON_AWQ = "1"\nLD_PRELOAD = "/opt/x.so"')
    )
    preset = tmp_path / "p.toml"
    preset.write_text(text)
    code, out = run(app, "--preset", str(preset), "--out", str(tmp_path / "o"))
    assert code == 2 and "LD_PRELOAD" in out and "--allow-env LD_PRELOAD" in out
    code, out = run(
        app, "--preset", str(preset), "--out", str(tmp_path / "o"), "--allow-env", "LD_PRELOAD"
    )
    assert code == 0, out
    assert "export LD_PRELOAD='/opt/x.so'" in (tmp_path / "o" / "awq.sh").read_text()
