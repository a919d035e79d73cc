"""The CLI entry imports neither torch, vllm nor Textual: `tunelab --help` stays fast."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner


def test_cli_entry_imports_no_heavy_modules() -> None:
    code = (
        "import sys, json\n"
        "from tui.cli import app, register_all\n"
        "register_all(app)\n"
        "heavy = [m for m in ('torch', 'vllm', 'transformers', 'textual', 'optuna', 'numpy') if m in sys.modules]\n"
        "print(json.dumps(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_help_lists_the_commands() -> None:
    from tui.cli import app, register_all

    register_all(app)
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("doctor", "demo-model", "tui"):
        assert name in result.output


def test_doctor_json_reports_vllm_and_no_gpu() -> None:
    from tui.cli import app, register_all

    register_all(app)
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["vllm"]["version"] == "0.32.0"
    assert report["vllm"]["platform"] == "cpu"
    assert report["vllm"]["entry"] == "module"
    assert report["gpu_count"] == 0 and report["gpu_backend"] == "none"
    assert any("amdsmi" in line for line in report["gpu_lines"])
