"""``presets verify`` on the study engine double: a preset exported from real trials, re-run.

The preset is exported from three finished trials (tuner.export.trial, so its
[workload], [results] and [results.noise] are the ones a user gets) and then
verified through the real CLI (tests/support/study_cli.py: ``tunelab`` with
the double as its engine). Unchanged, it passes (exit 0); on a node where
every token takes 3x as long, the check fails with a regression (exit 1).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.study_cli import double_command
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.export.preset import dump_preset
from tuner.export.trial import trial_preset
from tuner.rules import Target
from tuner.studies.executor import TrialRunner
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = Workload(input_len=16, output_len=24, num_prompts=32, concurrency=8, warmup_requests=0)


@pytest.fixture(scope="module")
def preset_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A preset exported from three double trials at 10 ms per token."""
    home = tmp_path_factory.mktemp("export")
    saved = {k: os.environ.get(k) for k in ("DOUBLE_TOKEN_MS", "TUNELAB_HOME")}
    os.environ.update(DOUBLE_TOKEN_MS="10", TUNELAB_HOME=str(home))
    try:
        config = EngineConfig(model="engine-double", engine={"max-num-seqs": 8})
        context = RunContext(Target(note="study engine double"), None, [])
        with TrialStore(home / "trials.db") as store:
            runner = TrialRunner(store, None, {"context": context}, double_command)
            trials = [Trial(config, WORKLOAD, study="src", repeat=i) for i in range(3)]
            done = asyncio.run(runner.all(trials))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert all(t.status is TrialStatus.DONE for t in done)
    preset = trial_preset(done[0], done)
    assert preset.results is not None and preset.results["noise"]["repeats"] == 3
    path = home / "double.toml"
    path.write_text(dump_preset(preset), encoding="utf-8")
    return path


def _verify(
    preset: Path, home: Path, token_ms: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNELAB_HOME": str(home), "DOUBLE_TOKEN_MS": token_ms, "COLUMNS": "200"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.study_cli",
            "presets",
            "verify",
            str(preset),
            "--repeats",
            "3",
            "--tolerance",
            "10%",
            "--store",
            str(home / "trials.db"),
            "--json",
            *extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_unchanged_preset_passes(preset_file: Path, tmp_path: Path) -> None:
    done = _verify(preset_file, tmp_path, "10")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] in ("pass", "improved") and not report["failed"]
    assert report["objective"] == "output_throughput" and len(report["fresh"]) == 3
    assert report["stored"]["n"] == 3


def test_slowed_node_fails_with_a_regression(preset_file: Path, tmp_path: Path) -> None:
    done = _verify(preset_file, tmp_path, "30")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "regression" and report["failed"]
    assert report["rel_ci_high"] < -0.10  # about a third of the stored throughput
    # The fresh trials are in the store under the verify study.
    with TrialStore(tmp_path / "trials.db") as store:
        fresh = store.list(report["study"])
    assert len(fresh) == 3 and all(t.tags["kind"] == "verify" for t in fresh)


def test_preset_without_results_is_a_user_error(tmp_path: Path) -> None:
    bare = tmp_path / "bare.toml"
    text = Path(REPO / "presets" / "cpu-demo.toml").read_text(encoding="utf-8")
    bare.write_text(text, encoding="utf-8")
    done = _verify(bare, tmp_path, "10")
    assert done.returncode == 2
    assert "no [results]" in done.stderr and "tunelab export" in done.stderr
    assert "Traceback" not in done.stderr
