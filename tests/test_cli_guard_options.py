"""``--guard-prompts``, ``--guard-tokens`` and ``--no-guard`` on the commands that run trials.

What the CLI prints and stores is compared with what the core returns for the
same input (tuner.lab.run.guard_settings), never with a copy of its rules.
The study runs use the study engine double (tests/support/study_cli.py): it
streams even when asked for JSON, so each guard run records that error — which
still shows the settings the runner was handed (tokens, number of probes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tuner.cli import study_session
from tuner.cli.app import app, register_all
from tuner.guard.settings import GuardSettingsError
from tuner.lab.run import guard_settings
from tuner.trials.store import TrialStore

register_all(app)
FAST = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
FAST += ["--num-prompts", "8", "--concurrency", "4", "--warmup", "0"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr(study_session, "make_runner", study_cli._make_runner)
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


def test_guard_options_reach_the_trial_runner(cli: CliRunner, tmp_path: Path) -> None:
    prompts = tmp_path / "probes.txt"
    prompts.write_text("The sky is\n\nOne, two,\nx = 1 +\n")
    db = str(tmp_path / "t.db")
    asked = ["--guard-prompts", str(prompts), "--guard-tokens", "3"]
    out = cli.invoke(app, ["sweep", "max-num-seqs=2", *FAST, "--study", "g", "--store", db, *asked])
    assert out.exit_code == 0, out.output
    off = cli.invoke(
        app, ["sweep", "max-num-seqs=2", *FAST, "--study", "off", "--store", db, "--no-guard"]
    )
    assert off.exit_code == 0, off.output
    expected = guard_settings(prompts, 3)
    with TrialStore(db) as store:
        (guarded,) = store.list("g")
        (unguarded,) = store.list("off")
    assert guarded.guard is not None and unguarded.guard is None
    assert guarded.guard["max_tokens"] == expected.tokens
    # The double fails the first probe; the message counts the probes the runner was given.
    assert f"probe 1/{len(expected.probes)}:" in guarded.guard["error"]


def _core_error(prompts: Path | None, tokens: int | None) -> GuardSettingsError:
    with pytest.raises(GuardSettingsError) as caught:
        guard_settings(prompts, tokens)
    return caught.value


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--model", "org/m"],
        ["ab", "--a-set", "max-num-seqs=1", "--b-set", "max-num-seqs=2", "--model", "org/m"],
        ["sweep", "max-num-seqs=1,2", "--model", "org/m"],
        ["tune", "--trials", "1", "--param", "max-num-seqs=1,2", "--model", "org/m"],
    ],
    ids=["run", "ab", "sweep", "tune"],
)
def test_bad_guard_options_are_refused_with_the_core_message_and_fix(
    cli: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    db = str(tmp_path / "t.db")
    for extra, prompts, tokens in (
        (["--guard-prompts", str(empty)], empty, None),
        (["--guard-tokens", "0"], None, 0),
        (["--guard-prompts", str(tmp_path / "missing.txt")], tmp_path / "missing.txt", None),
    ):
        error = _core_error(prompts, tokens)
        out = cli.invoke(app, [*command, *extra, "--store", db])
        assert out.exit_code == error.exit_code == 2, out.output
        assert f"tunelab {command[0]}: {error.message}" in out.stderr
        assert f"fix: {error.fix}" in out.stderr
    both = cli.invoke(app, [*command, "--no-guard", "--guard-tokens", "4", "--store", db])
    assert both.exit_code == 2 and "--no-guard turns the guard off" in both.stderr
    # Nothing ran: no trial was stored by any refused command.
    with TrialStore(db) as store:
        assert store.list() == []
