"""``tunelab run --preset`` measures the preset's ``[workload]``, with typed options over it.

A preset exported from a trial carries what it was measured on; running it on the default
workload instead would put figures of two workloads side by side. The merge is one core
function (:func:`tuner.lab.workload.over_preset_workload`); the CLI asks Typer which options
were typed and says on stderr what it ran. Run here through the real CLI on the engine double.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import study_cli
from tuner.bench.workload import Workload, WorkloadError
from tuner.cli.app import app, register_all
from tuner.lab.workload import over_preset_workload

register_all(app)

PRESET = """
[preset]
name = "double-prefix"
description = "the engine double with the workload it was measured on"
schema_version = 1

[target]
model = "engine-double"
vllm_version = "0.32.0"
platform = "cpu"
gpu_count = 0

[env]

[engine]
max-num-seqs = 4
"""
WORKLOAD = """
[workload]
input_len = 16
output_len = 8
num_prompts = 6
concurrency = 2
dataset_kind = "prefix"
prefix_len = 8
prefix_groups = 2
"""


def test_typed_options_win_over_the_stored_workload_and_the_rest_is_kept() -> None:
    stored = Workload(input_len=16, output_len=8, num_prompts=6, concurrency=2,
                      dataset_kind="prefix", prefix_len=8, prefix_groups=2).to_dict()  # fmt: skip
    typed = Workload(num_prompts=4, seed=9)
    merged, said = over_preset_workload(typed, {"num_prompts", "seed", "model"}, stored)
    assert (merged.num_prompts, merged.seed) == (4, 9)  # typed
    assert (merged.input_len, merged.concurrency, merged.prefix_groups) == (16, 2, 2)  # stored
    assert str(merged.dataset_kind) == "prefix"
    assert "prefix, 4 requests" in said and "--num-prompts, --seed as typed" in said
    assert over_preset_workload(typed, {"num_prompts"}, None) == (typed, "")
    with pytest.raises(WorkloadError):
        over_preset_workload(typed, set(), {"input_len": -3})


@pytest.mark.parametrize("with_workload", [True, False], ids=["workload", "no-workload"])
def test_run_preset_measures_the_preset_s_workload(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, with_workload: bool
) -> None:
    preset = tmp_path / "p.toml"
    preset.write_text(PRESET + (WORKLOAD if with_workload else ""))
    cli = study_cli.in_process(monkeypatch, DOUBLE_TOKEN_MS="5")
    args = ["run", "--preset", str(preset), "--num-prompts", "4", "--warmup", "0"]
    ran = cli.invoke(app, [*args, "--no-guard", "--json", "--input-len", "16"])
    assert ran.exit_code == 0, ran.output
    wl = json.loads(ran.stdout)["workload"]
    assert (wl["num_prompts"], wl["input_len"]) == (4, 16)  # typed
    if with_workload:
        assert (wl["output_len"], wl["concurrency"], wl.get("dataset_kind")) == (8, 2, "prefix")
        assert "workload: the preset's [workload] (prefix, 4 requests)" in ran.stderr
    else:
        assert (wl["output_len"], wl["concurrency"], wl.get("dataset_kind", "")) == (128, None, "")
        assert "preset's [workload]" not in ran.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "max-num-seqs=2,4"],
        ["ab", "--b-set", "max-num-seqs=8", "--repeats", "1"],
        ["tune", "--param", "max-num-seqs=2,4", "--trials", "1"],
        ["capacity", "--slo", "p99_ttft_ms<=10000", "--launches", "1", "--probes", "2"],
    ],
    ids=["sweep", "ab", "tune", "capacity"],
)
def test_every_study_command_measures_the_preset_s_workload(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str]
) -> None:
    """The preset's [workload] (here a shared-prefix one) is what a study's trials send, with
    the typed options over it: one core merge for run, sweep, ab, tune and capacity."""
    from tuner.trials.store import TrialStore

    preset = tmp_path / "p.toml"
    preset.write_text(PRESET + WORKLOAD)
    cli = study_cli.in_process(monkeypatch, DOUBLE_TOKEN_MS="2")
    store = tmp_path / "trials.db"
    flag = "--a-preset" if argv[0] == "ab" else "--preset"
    extra = [] if argv[0] == "capacity" else ["--no-guard"]
    if argv[0] == "tune":
        extra += ["--storage", f"sqlite:///{tmp_path / 'optuna.db'}"]
    ran = cli.invoke(app, [*argv, flag, str(preset), "--num-prompts", "4", "--warmup", "0",
                           "--store", str(store), *extra])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "workload: the preset's [workload] (prefix, 4 requests)" in ran.stderr
    with TrialStore(store) as opened:
        trials = opened.list()
    assert trials
    for trial in trials:
        wl = trial.workload
        assert (wl.input_len, wl.output_len, wl.prefix_groups) == (16, 8, 2), trial.workload
        assert str(wl.dataset_kind) == "prefix"
        # A capacity probe sends as many requests as its load needs (tuner.studies.capacity_run).
        assert wl.num_prompts == 4 or trial.is_probe
