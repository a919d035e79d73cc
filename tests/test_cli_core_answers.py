"""The CLI takes its decisions from the core: what it prints is what the core returned.

- ``tunelab bench`` and ``tunelab run`` read a request rate and an SLO with
  tuner.lab.workload's one parser (the TUI's too), so the same text gets the
  same answer on every face;
- ``tunelab bench``'s table shows the failures of the typed BenchResult, the
  same the result JSON it writes records;
- the study commands' trial runner is tuner.lab.run's (the TUI's jobs use it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.support.openai_stub import StubProcess
from tuner.bench.workload import WorkloadError
from tuner.cli import study_session
from tuner.cli.app import register_all
from tuner.lab import run as lab_run
from tuner.lab.workload import BY_NAME, parse_field
from tuner.trials.store import TrialStore

APP = register_all(typer.Typer())


def _invoke(*args: str) -> tuple[int, str, str]:
    out = CliRunner().invoke(APP, list(args), env={"COLUMNS": "200"})
    return out.exit_code, out.stdout, out.stderr


def _parser_error(name: str, text: str) -> str:
    field = BY_NAME[name]
    with pytest.raises(WorkloadError) as caught:
        parse_field(field, text, field.flag)
    return str(caught.value)


@pytest.mark.parametrize(
    ("name", "text"),
    [("request_rate", "fast"), ("request_rate", "0"), ("request_rate", "nan"), ("slo", "ttft")],
)
def test_bench_and_run_read_rates_and_slos_with_the_lab_parser(name: str, text: str) -> None:
    flag = BY_NAME[name].flag
    message = _parser_error(name, text)
    # Port 9 (discard) is never contacted: the workload is refused first.
    code, _, err = _invoke("bench", "--url", "http://127.0.0.1:9", flag, text)
    assert code == 2 and f"tunelab bench: {message}" in err
    code, _, err = _invoke("run", "--model", "org/m", flag, text)
    assert code == 2 and message in err


def test_bench_accepts_every_rate_word_the_lab_parser_accepts() -> None:
    """``infinity`` is a rate on every face (issue 12: the faces used to disagree)."""
    with StubProcess({"ttft_ms": 1, "itl_ms": 1}) as stub:
        for word in ("inf", "infinity", "2.5"):
            expected = parse_field(BY_NAME["request_rate"], word, "--request-rate")
            code, out, err = _invoke(
                "bench", "--url", stub.url, "--num-prompts", "2", "--input-len", "8",
                "--output-len", "2", "--request-rate", word, "--json",
            )  # fmt: skip
            assert code == 0, err
            assert json.loads(out)["request_rate"] == (
                "inf" if expected == float("inf") else expected
            )


def test_bench_table_prints_the_failures_its_result_records(tmp_path: Path) -> None:
    plan = {"ttft_ms": 1, "itl_ms": 1, "faults": [{"every": 2, "kind": "http", "status": 500}]}
    saved = tmp_path / "result.json"
    with StubProcess(plan) as stub:
        code, out, err = _invoke(
            "bench", "--url", stub.url, "--num-prompts", "4", "--input-len", "8",
            "--output-len", "2", "--output", str(saved),
        )  # fmt: skip
    assert code == 0, err
    data = json.loads(saved.read_text())
    failures = data["tunelab"]["failures"]
    assert failures and data["failed"] == sum(failures.values())
    for kind, count in failures.items():
        assert f"failed: {count} × {kind}" in out
    (row,) = [line for line in out.splitlines() if "Successful requests" in line]
    assert row.split()[-2] == str(data["completed"])


def test_study_commands_run_trials_through_the_lab_runner(tmp_path: Path) -> None:
    def on_event(event: object) -> None:
        return None

    with TrialStore(tmp_path / "t.db") as store:
        mine = study_session.make_runner(store, on_event, 7.0)
        lab = lab_run.runner(store, lab_run.RunOptions(startup_timeout=7.0), on_event)
    assert type(mine) is type(lab)
    assert mine.options == lab.options and mine.options["startup_timeout"] == 7.0
    assert mine.command_for is lab.command_for is None
