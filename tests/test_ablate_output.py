"""``tunelab ablate --output``: checked before the first trial, and the result kept if writing fails.

The ablation itself is replaced by a stand-in (the study machinery has its
own test, tests/test_ablate_double.py): here it either must never be reached
(a destination that cannot work is refused first) or it pulls the
destination away while "running", as a full disk or a removed folder would.
Through the real command, with Typer's CliRunner.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.support import study_cli
from tuner import paths
from tuner.bench.workload import Workload
from tuner.cli import ablate as ablate_cli
from tuner.cli import study_session
from tuner.config import EngineConfig
from tuner.lab import plans as lab_plans
from tuner.studies.ablate import AblationReport
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

RESULTS = {"completed": 4, "failed": 0, "output_throughput": 100.0}


@pytest.fixture
def winner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Trial:
    """A study with a baseline and a winner; no engine is ever started (the double, if any)."""
    monkeypatch.setattr(study_session, "make_runner", study_cli._make_runner)
    wl = Workload(input_len=8, output_len=8, num_prompts=4)
    with TrialStore() as store:
        base = Trial(EngineConfig(model="org/m", engine={"max-num-seqs": 2}), wl, study="s")
        best = Trial(EngineConfig(model="org/m", engine={"max-num-seqs": 8}), wl, study="s")
        for trial, value in ((base, 100.0), (best, 150.0)):
            store.add(trial)
            store.save_result(trial, {**RESULTS, "output_throughput": value})
    return best


def _never(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the ablation ran although --output could not be written")


def _ablate(*args: str) -> tuple[int, str, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    ablate_cli.register(app)
    result = CliRunner().invoke(app, ["ablate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.stdout, result.stderr


def _bad_destinations(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    existing = tmp_path / "exists.toml"
    existing.write_text("keep me")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    return {
        "missing folder": (tmp_path / "nope" / "m.toml", "does not exist"),
        "existing file": (existing, "already exists"),
        "fifo": (fifo, "is not a regular file"),
        "device": (Path("/dev/null"), "is not a regular file"),
        "under a file": (existing / "m.toml", "does not exist"),
    }


@pytest.mark.parametrize(
    "case", ["missing folder", "existing file", "fifo", "device", "under a file"]
)
def test_a_bad_output_is_refused_before_any_trial(
    winner: Trial, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.setattr(lab_plans, "run_ablation", _never)
    output, says = _bad_destinations(tmp_path)[case]
    code, _out, err = _ablate(winner.id, "--output", str(output))
    assert code == 2, err
    assert says in err and "fix:" in err and "Traceback" not in err
    assert (tmp_path / "exists.toml").read_text() == "keep me"


def _stand_in(effect: object = None) -> object:
    async def run(winner: Trial, baseline: Trial, *_a: object, **_k: object) -> AblationReport:
        if callable(effect):
            effect()
        return AblationReport(winner.id, baseline.id, "output_throughput", [], winner.config)

    return run


def test_a_folder_as_output_gets_the_preset_inside(
    winner: Trial, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lab_plans, "run_ablation", _stand_in())
    folder = tmp_path / "presets"
    folder.mkdir()
    code, out, err = _ablate(winner.id, "--output", str(folder))
    written = folder / f"minimal-{winner.short_id}.toml"
    assert code == 1, err  # nothing was measured by the stand-in: exit 1, as before
    assert f"minimal preset written to {written}" in out
    assert 'name = "minimal-' in written.read_text()


def test_existing_file_with_force_is_replaced(
    winner: Trial, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lab_plans, "run_ablation", _stand_in())
    target = tmp_path / "m.toml"
    target.write_text("old")
    code, out, err = _ablate(winner.id, "--output", str(target), "--force")
    assert "Traceback" not in err and "minimal preset written to" in out, (code, err)
    assert 'name = "minimal-' in target.read_text()


def test_a_destination_gone_after_the_run_keeps_the_preset(
    winner: Trial, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    monkeypatch.setattr(lab_plans, "run_ablation", _stand_in(folder.rmdir))
    code, out, err = _ablate(winner.id, "--output", str(folder / "m.toml"))
    assert code == 1
    assert "Traceback" not in err
    kept = list((paths.data_dir() / "results").glob("m-*.toml"))
    assert len(kept) == 1, err
    assert f"was saved to {kept[0]} instead" in err
    assert f"minimal preset written to {kept[0]}" in out
    assert 'name = "minimal-' in kept[0].read_text()


def test_when_no_file_can_be_written_the_preset_is_printed(
    winner: Trial, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    blocker = tmp_path / "data-is-a-file"
    blocker.write_text("")

    def break_both() -> None:
        folder.rmdir()
        monkeypatch.setattr(paths, "data_dir", lambda: blocker)  # mkdir under a file fails

    monkeypatch.setattr(lab_plans, "run_ablation", _stand_in(break_both))
    code, out, err = _ablate(winner.id, "--output", str(folder / "m.toml"))
    assert code == 1 and "Traceback" not in err
    assert "it is printed below" in err
    assert 'name = "minimal-' in out and "[engine]" in out
