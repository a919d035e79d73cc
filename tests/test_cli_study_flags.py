"""The study commands' design flags reach the core: --spending/--pooled (ab), --no-prune and
--gpus (sweep, tune), on the study engine double through the real CLI.

What the core stored (the trials' tags, statuses and slots) is the evidence, not the output text.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tuner.cli.app import app, register_all
from tuner.studies.pruning import is_pruned
from tuner.trials.model import TrialStatus
from tuner.trials.slots import FORCE_ENV
from tuner.trials.store import TrialStore

register_all(app)
FAST = study_cli.FAST


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    return study_cli.in_process(monkeypatch, **{FORCE_ENV: "0"})


def _store_trials(tunelab_home, study: str):  # type: ignore[no-untyped-def]
    from tuner.trials.store import default_path

    with TrialStore(default_path()) as store:
        return store.list(study=study)


def test_ab_spending_front_is_stored_as_the_pooled_front_design(
    cli: CliRunner, tunelab_home
) -> None:
    args = ["ab", "--a-set", "max-num-seqs=1", "--b-set", "max-num-seqs=8", "--max-repeats", "3"]
    result = cli.invoke(app, [*args, "--spending", "front", *FAST, "--study", "fr", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == "B better"
    designs = {
        json.dumps(t.tags["sequential"], sort_keys=True) for t in _store_trials(tunelab_home, "fr")
    }
    (design,) = (json.loads(d) for d in designs)
    assert design["spending"] == "front" and design["pooled"] is True


def test_ab_refuses_an_unknown_spending(cli: CliRunner) -> None:
    result = cli.invoke(app, ["ab", "--a-set", "max-num-seqs=1", "--spending", "fast", *FAST])
    assert result.exit_code == 2
    assert "--spending must be pocock, obf or front" in result.output


def test_sweep_no_prune_measures_the_slow_point_to_the_end(
    cli: CliRunner, tunelab_home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "10")
    slow = ["--num-prompts", "60"]
    result = cli.invoke(
        app, ["sweep", "max-num-seqs=8,1", "--no-prune", *FAST, *slow, "--study", "np", "--json"]
    )
    assert result.exit_code == 0, result.output
    trials = _store_trials(tunelab_home, "np")
    assert len(trials) == 2
    assert all(t.status is TrialStatus.DONE and not is_pruned(t) for t in trials)


@pytest.mark.parametrize("command", ["sweep", "tune"])
def test_sweep_and_tune_refuse_gpus_that_are_not_there(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv(FORCE_ENV, "2")
    study = (
        ["max-num-seqs=1,8"]
        if command == "sweep"
        else ["--trials", "1", "--param", "max-num-seqs=1,8"]
    )
    result = cli.invoke(app, [command, *study, "--gpus", "5", *FAST])
    assert result.exit_code == 2, result.output
    assert "5" in result.output and "gpu" in result.output.lower()
