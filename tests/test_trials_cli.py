"""``tunelab run / results / show`` without starting an engine: skips, listing, export, bad input."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tuner.bench.workload import Workload
from tuner.cli import run as run_cli
from tuner.cli import trials as trials_cli
from tuner.config import EngineConfig
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    run_cli.register(app)
    trials_cli.register(app)
    return app


def invoke(app: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def stored(tmp_path: Path) -> tuple[Trial, Trial]:
    store = TrialStore()
    log = tmp_path / "engine.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    done = Trial(
        EngineConfig(model="org/m", engine={"max-num-seqs": 32}),
        Workload(concurrency=8),
        study="cli",
    )
    store.add(done)
    store.update_status(
        done,
        TrialStatus.STARTING,
        log_path=str(log),
        startup_seconds=42.0,
        backend_actual="CPU_ATTN",
    )
    done.environment = {"vllm_version": "0.32.0", "torch_version": "2.13.0+cpu"}
    busy = {"window_s": 10.0, "cores": 2, "foreign_share": 0.45, "steal_share": 0.0,
            "top": [["stress-ng", 9.0]]}  # fmt: skip
    store.save_result(
        done,
        {"output_throughput": 321.0, "p99_ttft_ms": 12.5, "completed": 64, "failed": 0,
         "tunelab": {"host_noise": busy}},
    )  # fmt: skip
    failed = Trial(EngineConfig(model="org/m"), Workload(), study="other")
    store.add(failed)
    store.update_status(failed, TrialStatus.FAILED, failure_reason="the engine did not start: boom")
    store.close()
    return done, failed


def test_results_table_json_and_csv(app: typer.Typer, tmp_path: Path) -> None:
    done, failed = stored(tmp_path)
    code, out, _ = invoke(app, "results")
    assert code == 0
    assert done.short_id in out and failed.short_id in out and "321.0" in out and "failed" in out
    code, out, _ = invoke(app, "results", "--study", "cli", "--json")
    assert code == 0
    data = json.loads(out)
    assert [d["id"] for d in data] == [done.id] and data[0]["objective_value"] == 321.0
    code, out, _ = invoke(app, "results", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["status"] for r in rows] == ["done", "failed"]
    assert rows[0]["set:max-num-seqs"] == "32"
    code, out, _ = invoke(app, "results", "--status", "failed", "--json")
    assert [d["id"] for d in json.loads(out)] == [failed.id]


def test_results_on_an_empty_store(app: typer.Typer) -> None:
    code, out, _ = invoke(app, "results")
    assert code == 0 and "No trials" in out
    code, out, _ = invoke(app, "results", "--json")
    assert code == 0 and json.loads(out) == []


def test_show_by_prefix_with_log_tail(app: typer.Typer, tmp_path: Path) -> None:
    done, failed = stored(tmp_path)
    code, out, _ = invoke(app, "show", done.id[:6])
    assert code == 0
    assert done.id in out and "CPU_ATTN" in out and "42.0 s" in out and "line 49" in out
    assert str(tmp_path / "engine.log") in out.replace("\n", "")
    flat = " ".join(out.split())
    assert "Environment: vllm_version 0.32.0, torch_version 2.13.0+cpu" in flat
    assert "host: other processes used 45% of the machine's CPU (stress-ng 9.0 s)" in flat
    code, out, _ = invoke(app, "show", done.id, "--json")
    data = json.loads(out)
    assert (
        data["id"] == done.id and data["log_tail"][-1] == "line 49" and len(data["log_tail"]) == 20
    )
    code, out, _ = invoke(app, "show", failed.id)
    assert "the engine did not start: boom" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("results", "--json", "--csv"), "choose one of --json and --csv"),
        (("results", "--status", "bogus"), "unknown status 'bogus'"),
        (("show", "zzzz"), "no trial with id 'zzzz'"),
        (
            ("run", "--model", "org/m", "--request-rate", "fast"),
            "--request-rate 'fast' is not a number",
        ),
        (("run", "--model", "org/m", "--set", "max-num-seqs"), "has no '='"),
        (("run", "--model", "org/m", "--slo", "ttft=5"), "SLO entry"),
        (("run", "--model", "org/m", "--preset", "/nonexistent.toml"), "nonexistent"),
        (("run", "--model", "org/m", "--objective", "speed"), "unknown objective 'speed'"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    app: typer.Typer, args: tuple[str, ...], message: str
) -> None:
    code, out, err = invoke(app, *args)
    assert code == 2, (out, err)
    assert message in err
    assert not TrialStore().list(), "bad input must not leave a trial behind"


def test_run_skips_a_config_the_rules_reject_without_an_engine(app: typer.Typer) -> None:
    code, out, err = invoke(
        app,
        "run",
        "--model",
        "tunelab:demo",
        "--set",
        "tensor-parallel-size=3",
        "--num-prompts",
        "4",
        "--json",
    )
    assert code == 1, err
    data = json.loads(out)
    assert (
        data["status"] == "skipped" and data["startup_seconds"] is None and data["log_path"] is None
    )
    assert any(f["rule"] == "tensor-parallel-divides-heads" for f in data["findings"])
    (trial,) = TrialStore().list()
    assert trial.status is TrialStatus.SKIPPED and trial.id == data["id"]


def test_results_marks_an_itl_measured_on_one_piece_responses(app: typer.Typer) -> None:
    streamed = {"output_throughput": 300.0, "p99_itl_ms": 9.5, "completed": 8, "failed": 0}
    one_piece = {**streamed, "p99_itl_ms": 0.0, "tunelab": {"one_chunk_fraction": 1.0}}
    with TrialStore() as store:
        trials = []
        for results in (streamed, one_piece):
            t = Trial(EngineConfig(model="org/m"), Workload(concurrency=2), study="itl")
            store.add(t)
            store.save_result(t, results)
            trials.append(t)
    code, out, _ = invoke(app, "results", "--study", "itl")
    assert code == 0, out
    rows = {t.short_id: next(ln for ln in out.splitlines() if t.short_id in ln) for t in trials}
    assert "⚠ 0.0 (one piece)" in rows[trials[1].short_id]
    assert "9.5" in rows[trials[0].short_id] and "one piece" not in rows[trials[0].short_id]
