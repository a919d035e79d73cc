"""``tunelab ablate`` on the study engine double: a 3-knob winner, one knob of which is noise.

The double's speed depends on two of the winner's knobs — ``max-num-seqs``
(streams generating at once; the workload has 8 users) and
``DOUBLE_TOKEN_MS`` (the gap between tokens) — and not at all on the third,
``block-size``, which it ignores. The ablation must keep the first two with
their effect and interval, drop the third as noise, confirm the shorter config
against the winner, and write a preset that carries all of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.study_cli import double_command
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.export.preset import load_preset
from tuner.rules import Target
from tuner.studies.executor import TrialRunner
from tuner.trials import event_codec
from tuner.trials.context import RunContext
from tuner.trials.events import TrialDone
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

REPO = Path(__file__).resolve().parents[1]
# Runs of ~1-4 s: long enough that a loaded 2-core runner's scheduling delays stay far
# inside the 2x and 4x effects (a 24 x 16-token run of ~0.3 s once lost them in the noise).
WORKLOAD = Workload(input_len=16, output_len=32, num_prompts=48, concurrency=8, warmup_requests=0)
BASE = EngineConfig(
    model="engine-double", env={"DOUBLE_TOKEN_MS": "10"}, engine={"max-num-seqs": 2}
)
WINNER = EngineConfig(
    model="engine-double",
    env={"DOUBLE_TOKEN_MS": "5"},
    engine={"max-num-seqs": 8, "block-size": 32},
)


def _study(home: Path) -> str:
    """A study with the baseline first and the winner second; returns the winner's id."""
    context = RunContext(Target(note="study engine double"), None, [])
    with TrialStore(home / "trials.db") as store:
        runner = TrialRunner(store, None, {"context": context}, double_command)
        base, best = asyncio.run(
            runner.all(
                [Trial(BASE, WORKLOAD, study="tuned"), Trial(WINNER, WORKLOAD, study="tuned")]
            )
        )
    assert base.status is TrialStatus.DONE and best.status is TrialStatus.DONE
    return best.id


def test_ablation_keeps_the_knobs_that_matter_and_drops_the_noise(tmp_path: Path) -> None:
    env = {**os.environ, "TUNELAB_HOME": str(tmp_path), "DOUBLE_NOISE": "0.03", "COLUMNS": "200"}
    # As when the study service runs it: a TUI can follow the ablation through this file.
    events_file = tmp_path / "job.events.jsonl"
    env[event_codec.EVENTS_ENV] = str(events_file)
    os.environ["TUNELAB_HOME"] = str(tmp_path)
    try:
        winner = _study(tmp_path)
    finally:
        del os.environ["TUNELAB_HOME"]
    out = tmp_path / "minimal.toml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.study_cli",
            "ablate",
            winner,
            "--store",
            str(tmp_path / "trials.db"),
            "--repeats",
            "3",
            "--confidence",
            "0.99",
            "--output",
            str(out),
            "--json",
            "--allow-env",  # the trials carry the double's speed knob (not known data)
            "DOUBLE_TOKEN_MS",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    effects = report["effects"]
    print(json.dumps(effects, indent=1))
    assert set(effects) == {"DOUBLE_TOKEN_MS", "block-size", "max-num-seqs"}
    assert effects["max-num-seqs"]["kept"] and effects["DOUBLE_TOKEN_MS"]["kept"]
    assert not effects["block-size"]["kept"]
    # Each kept knob's effect: 2 -> 8 streams for 8 users, and 10 -> 5 ms per token.
    assert effects["max-num-seqs"]["ci_low"] > 0.5
    assert effects["DOUBLE_TOKEN_MS"]["ci_low"] > 0.1
    low, high = effects["block-size"]["ci_low"], effects["block-size"]["ci_high"]
    assert low <= 0 <= high
    assert report["confirmed"] and report["confirmation"]["verdict"] != "B better"
    assert report["minimal"]["engine"] == {"max-num-seqs": 8}
    assert report["minimal"]["env"] == {"DOUBLE_TOKEN_MS": "5"}
    # The preset: the minimal config, each knob's effect, its own measured noise.
    preset = load_preset(out, allow_env=("DOUBLE_TOKEN_MS",))  # the double's speed knob
    assert preset.config.engine == {"max-num-seqs": 8}
    assert preset.results is not None
    ablation = preset.results["ablation"]
    assert (
        ablation["block-size"]["kept"] is False and ablation["block-size"]["baseline"] == "default"
    )
    assert ablation["max-num-seqs"]["baseline"] == 2
    assert preset.results["noise"]["repeats"] == 3
    assert preset.workload is not None and preset.workload["concurrency"] == 8
    # Every trial the ablation ran reached the job's event file with its final state.
    with TrialStore(tmp_path / "trials.db") as store:
        ran = {t.id for t in store.list() if t.study != "tuned"}
    rows, _ = event_codec.read_lines(events_file, 0)
    ended = {
        s.event.trial.id for s in event_codec.decode_all(rows) if isinstance(s.event, TrialDone)
    }
    assert ran and ended == ran, (len(ran), len(ended))


def test_a_trial_without_a_baseline_is_a_user_error(tmp_path: Path) -> None:
    env = {**os.environ, "TUNELAB_HOME": str(tmp_path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.study_cli",
            "ablate",
            "nosuchtrial",
            "--store",
            str(tmp_path / "trials.db"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
