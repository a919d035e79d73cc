"""Every face's trials get the node's GPU telemetry (issue 28), not only the TUI's.

``tunelab run`` and ``tunelab ab`` run here through the real CLI on the study
engine double, with the node's GPUs read through the amdsmi backend over the
FAKE amdsmi module (recorded MI355X responses; no GPU exists on this machine).
Each trial must come back with its telemetry window, tokens per joule and
clean-sample count, and the A/B's verdict with its "GPU samples clean" note.
Without GPUs, or when a driver fails, the trials run exactly as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tests.support.tui_harness import fake_amd_backend
from tuner.cli.app import app, register_all
from tuner.lab import node
from tuner.lab.study import Study
from tuner.telemetry import NoneBackend
from tuner.trials.model import TrialStatus
from tuner.trials.slots import FORCE_ENV
from tuner.trials.store import TrialStore, default_path

register_all(app)
FAST = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
FAST += ["--num-prompts", "16", "--concurrency", "4", "--warmup", "0", "--no-guard"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    # A measured run of ~1.3 s (a few samples at 2 Hz), on two GPU slots, so each engine
    # is pinned and its window holds its own GPU (the recorded node's GPU 5 reads no
    # power: a window over all eight has no energy).
    return study_cli.in_process(monkeypatch, **{"DOUBLE_TOKEN_MS": "20", FORCE_ENV: "2"})


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    opened: list[Any] = []

    def open_fake() -> Any:
        backend = fake_amd_backend()
        opened.append(backend)
        return backend

    monkeypatch.setattr(node, "open_backend", open_fake)
    return opened


def _windowed(telemetry: dict[str, Any] | None) -> None:
    assert telemetry is not None, "the trial has no telemetry window"
    assert telemetry["samples"] >= 2 and len(telemetry["gpus"]) == 1, telemetry["samples"]
    assert telemetry["coverage"] and telemetry["coverage"] > 0.9
    assert telemetry["mean_power_w"] and telemetry["mean_power_w"] > 0
    assert telemetry["tokens_per_joule"] and telemetry["tokens_per_joule"] > 0


def test_run_and_ab_from_the_cli_are_measured_with_the_gpus(
    cli: CliRunner, fake_gpus: list[Any]
) -> None:
    ran = cli.invoke(app, ["run", *FAST, "--study", "tel", "--json"])
    assert ran.exit_code == 0, ran.output
    _windowed(json.loads(ran.stdout)["telemetry"])
    ab = cli.invoke(
        app,
        [
            "ab",
            "--a-set",
            "max-num-seqs=2",
            "--b-set",
            "max-num-seqs=4",
            "--repeats",
            "2",
            *FAST,
            "--study",
            "tel-ab",
            "--json",
        ],
    )
    assert ab.exit_code == 0, ab.output
    report = json.loads(ab.stdout)
    with TrialStore(default_path()) as store:
        trials = store.list(study="tel-ab")
        last = Study(store, "tel-ab").last_ab()
    assert len(trials) == 4 and all(t.status is TrialStatus.DONE for t in trials)
    for t in trials:
        _windowed(t.telemetry)
    (clean,) = [n for n in report["notes"] if n.startswith("GPU samples clean: ")]
    assert clean.startswith("GPU samples clean: A ") and ", B " in clean
    assert last is not None and clean in last.notes  # the replay says the same
    # One backend per command, each closed at its end.
    assert len(fake_gpus) == 2


def test_without_gpus_or_with_a_failing_driver_trials_run_unmeasured(
    cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(NoneBackend):
        def count(self) -> int:
            raise RuntimeError("amdsmi: driver went away")

    for backend in (NoneBackend(["no GPU here"]), Broken(["broken"])):
        monkeypatch.setattr(node, "open_backend", lambda b=backend: b)
        with node.telemetry() as sampler:
            assert sampler is None
    # The broken driver's run: measured, stored, no telemetry, no crash.
    ran = cli.invoke(app, ["run", *FAST, "--study", "plain", "--json"])
    assert ran.exit_code == 0, ran.output
    out = json.loads(ran.stdout)
    assert out["status"] == "done" and out["telemetry"] is None


def test_telemetry_can_be_turned_off_and_the_ring_spans_an_hour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(node.TELEMETRY_ENV, "none")
    backend = node._open_backend()
    assert backend.count() == 0 and "disabled" in " ".join(backend.reasons)
    # A measured run must fit in the sampler's ring (tuner.trials.session.telemetry).
    assert node.history_for(2.0) == 7200
