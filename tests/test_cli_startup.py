"""The CLI entry imports neither torch, vllm nor Textual: `tunelab --help` stays fast."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from tuner.cli.app import COMMAND_MODULES, COMMANDS


def test_cli_entry_imports_no_heavy_modules() -> None:
    code = (
        "import sys, json\n"
        "from tui.cli import app\n"
        "from tuner.cli.app import register_all\n"
        "register_all(app)\n"
        "heavy = [m for m in ('torch', 'vllm', 'transformers', 'textual', 'optuna', 'numpy') if m in sys.modules]\n"
        "print(json.dumps(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_a_command_loads_its_own_module_and_no_other() -> None:
    """`tunelab bench` imports tuner.cli.bench only; `tunelab` (the TUI) no command module."""
    code = (
        "import sys, json\n"
        "from tui.cli import app\n"
        "from typer.main import get_command\n"
        "root = get_command(app)\n"
        "before = sorted(m for m in sys.modules if m.startswith('tuner.cli.'))\n"
        "cmd = root.get_command(None, sys.argv[1])\n"
        "after = sorted(m for m in sys.modules if m.startswith('tuner.cli.'))\n"
        "print(json.dumps([before, after, cmd.name]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "winner"], capture_output=True, text=True, check=True
    )
    before, after, name = json.loads(out.stdout)
    assert name == "winner"
    command_modules = {f"tuner.cli.{m}" for m in COMMAND_MODULES}
    assert not command_modules & set(before)  # the TUI's entry loads no command
    assert command_modules & set(after) == {"tuner.cli.studies"}  # winner's own module


def test_every_command_a_module_defines_is_in_the_lazy_table() -> None:
    """A command a module registers but COMMANDS misses would vanish from `tunelab`."""
    import importlib

    import typer
    import typer.main

    for module in COMMAND_MODULES:
        sub = typer.Typer()
        importlib.import_module(f"tuner.cli.{module}").register(sub)
        for name in typer.main.get_group(sub).commands:
            assert COMMANDS.get(name) == module, (name, module)
    from tui.cli import app

    shown = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    assert all(f" {name} " in shown for name in COMMANDS)


def test_help_lists_the_commands() -> None:
    from tui.cli import app
    from tuner.cli.app import register_all

    register_all(app)
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("doctor", "demo-model", "tui"):
        assert name in result.output


def test_doctor_json_reports_vllm_and_no_gpu() -> None:
    from tui.cli import app
    from tuner.cli.app import register_all

    register_all(app)
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["vllm"]["version"] == "0.32.0"
    assert report["vllm"]["platform"] == "cpu"
    assert report["vllm"]["entry"] == "module"
    assert report["gpu_count"] == 0 and report["gpu_backend"] == "none"
    assert any("amdsmi" in line for line in report["gpu_lines"])


def test_the_help_listing_loads_no_command_and_reads_as_the_commands_themselves() -> None:
    """`tunelab --help` lists from COMMAND_TABLE; it must say what the loaded commands say."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from tui.cli import app\n"
        "if sys.argv[1] == 'eager':\n"
        "    from tuner.cli.app import register_all\n"
        "    register_all(app)\n"
        "out = CliRunner().invoke(app, ['--help'], terminal_width=120).output\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('tuner.cli.') and m not in\n"
        "    ('tuner.cli.app', 'tuner.cli.safe_text', 'tuner.cli.consent_options'))\n"
        "print(out)\n"
        "print('LOADED', loaded)\n"
    )

    def listing(mode: str) -> tuple[str, str]:
        out = subprocess.run(
            [sys.executable, "-c", code, mode], capture_output=True, text=True, check=True
        ).stdout
        text, _, loaded = out.rpartition("LOADED ")
        return text, loaded.strip()

    lazy, lazy_loaded = listing("lazy")
    eager, _ = listing("eager")
    # The table's summaries are the commands' own first lines (the order may differ:
    # an eager Typer lists the sub-apps, presets and jobs, after the commands).
    assert sorted(lazy.splitlines()) == sorted(eager.splitlines())
    # The listing imported no command module (the tui command's own --allow-code/--allow-env
    # come from tuner.cli.consent_options, which holds options, not commands).
    assert lazy_loaded == "[]"
