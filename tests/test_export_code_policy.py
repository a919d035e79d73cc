"""Code-loading engine arguments in an imported preset are refused without --allow-code."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner import policy
from tuner.cli.app import register_all
from tuner.config import EngineConfig
from tuner.export.errors import ExportError, PresetError
from tuner.export.preset import loads_preset
from tuner.export.render import export

app = register_all(typer.Typer())  # every tunelab command, as the console script has

HEAD = """
[preset]
name = "p"
schema_version = 1

[target]
model = "org/model"

[engine]
"""
CASES = [
    ("trust-remote-code = true", "trust-remote-code"),
    ('tool-parser-plugin = "/tmp/pwn.py"', "tool-parser-plugin"),
    ('reasoning-parser-plugin = "/tmp/pwn.py"', "reasoning-parser-plugin"),
    ('worker-extension-cls = "evilpkg.Ext"', "worker-extension-cls"),
    ('worker-cls = "evilpkg.W"', "worker-cls"),
    ('scheduler-cls = "evilpkg.S"', "scheduler-cls"),
    ('middleware = "evilpkg.mw"', "middleware"),
    ('logits-processors = ["evilpkg.LP"]', "logits-processors"),
    ('config = "/tmp/evil.yaml"', "config"),
    ('io-processor-plugin = "evil"', "io-processor-plugin"),
    ('distributed-executor-backend = "evilpkg.Exec"', "distributed-executor-backend"),
    (
        'kv-transfer-config = {kv_connector = "X", kv_connector_module_path = "evilpkg"}',
        "kv-transfer-config.kv_connector_module_path",
    ),
    ('speculative-config = {model = "evilpkg.Proposer"}', "speculative-config.model"),
]


@pytest.mark.parametrize(("line", "name"), CASES)
def test_refused_without_allow_code_and_named(line: str, name: str) -> None:
    with pytest.raises(PresetError) as info:
        loads_preset(HEAD + line + "\n", resolve=False)
    assert name in str(info.value) and "--allow-code" in str(info.value)
    preset = loads_preset(HEAD + line + "\n", resolve=False, allow_code=True)
    refused = policy.violations(preset.config, policy.Consent())
    assert [v.key for v in refused] == [name]
    assert policy.violations(preset.config, policy.Consent(code=True)) == []


def test_harmless_values_are_not_code() -> None:
    engine = {
        "trust-remote-code": False,
        "distributed-executor-backend": "mp",
        "compilation-config": {"cudagraph_mode": "FULL"},
        "max-num-seqs": 8,
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
    }
    assert policy.violations(EngineConfig("org/m", engine=engine), policy.Consent()) == []


def test_export_never_writes_code_loading_args_silently(tmp_path: Path) -> None:
    config = EngineConfig(model="org/m", engine={"trust-remote-code": True})
    with pytest.raises(ExportError, match="trust-remote-code"):
        export(config, tmp_path, name="x")
    assert list(tmp_path.iterdir()) == []
    written = export(config, tmp_path, name="x", allow_code=True)
    assert "--trust-remote-code" in (tmp_path / "x.sh").read_text()
    assert len(written) == 4


def test_cli_presets_check_and_export_need_allow_code(tmp_path: Path) -> None:
    path = tmp_path / "evil.toml"
    path.write_text(HEAD + 'tool-parser-plugin = "/tmp/pwn.py"\n')
    runner = CliRunner()
    res = runner.invoke(app, ["presets", "check", str(path), "--no-compare-installed"])
    assert res.exit_code == 1 and "tool-parser-plugin loads code" in res.output
    out = tmp_path / "out"
    res = runner.invoke(app, ["export", "--preset", str(path), "--out", str(out)])
    assert res.exit_code == 2 and "tool-parser-plugin" in res.output
    assert not out.exists() or list(out.iterdir()) == []
    res = runner.invoke(app, ["export", "--preset", str(path), "--out", str(out), "--allow-code"])
    assert res.exit_code == 0, res.output
    assert "--tool-parser-plugin='/tmp/pwn.py'" in (out / "p.sh").read_text()


def test_check_set_gives_the_same_policy_answer() -> None:
    res = CliRunner().invoke(
        app,
        [
            "check",
            "--platform",
            "rocm",
            "--vllm-version",
            "0.12.0",
            "--set",
            "trust-remote-code=true",
        ],
    )
    assert res.exit_code == 2
    assert "trust-remote-code loads code" in res.output and "unknown knob" not in res.output


def test_secret_engine_args_are_refused_in_presets() -> None:
    with pytest.raises(PresetError, match="HF_TOKEN"):
        loads_preset(HEAD + 'hf-token = "hf_CANARY"\n', resolve=False)
    with pytest.raises(PresetError, match="VLLM_API_KEY"):
        loads_preset(HEAD + 'api-key = "CANARY"\n', resolve=False)
