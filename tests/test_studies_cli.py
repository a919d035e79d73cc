"""``tunelab ab|sweep|tune|winner``: real runs on the study engine double, and bad input.

The runs go through the real CLI in-process with the study engine double as
the engine (``make_runner`` is swapped the way tests/support/study_cli.py
does it); the engine itself is tested in test_studies_engine.py.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tuner.cli import study_session
from tuner.cli.app import app, register_all

register_all(app)
FAST = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
FAST += ["--num-prompts", "16", "--concurrency", "8", "--warmup", "0"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setattr(study_session, "make_runner", study_cli._make_runner)
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


def _json(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ab_on_the_double_reaches_the_right_verdict(cli: CliRunner) -> None:
    args = ["ab", "--a-set", "max-num-seqs=1", "--b-set", "max-num-seqs=8", "--repeats", "3"]
    data = _json(cli.invoke(app, [*args, *FAST, "--study", "ab1", "--json"]))
    assert data["verdict"] == "B better", data["summary"]
    assert len(data["trials"]["A"]) == len(data["trials"]["B"]) == 3
    head = next(m for m in data["metrics"] if m["metric"] == "output_throughput")
    assert head["scale"] == "ratio" and head["rel_ci_low"] > 0
    table = cli.invoke(app, ["winner", "--study", "ab1"])
    assert table.exit_code == 0, table.output
    assert "winner" in table.stdout and "max-num-seqs=8" in table.stdout


def test_sweep_with_descent_keeps_the_best_and_reuses_points(cli: CliRunner) -> None:
    args = ["sweep", "max-num-seqs=1,8", "--descent", "concurrency=2,8", *FAST, "--json"]
    data = _json(cli.invoke(app, [*args, "--study", "sw1"]))
    assert data["best_values"] == {"max-num-seqs": 8, "concurrency": 8}
    first, second = data["steps"]
    assert first["best"] == 8 and second["best"] == 8
    # (max-num-seqs=8, concurrency=8) was measured in step 1 (the base concurrency is 8): reused.
    reused = next(p for p in second["points"] if p["value"] == 8)
    assert reused["trials"] == next(p for p in first["points"] if p["value"] == 8)["trials"]
    results = cli.invoke(app, ["results", "--study", "sw1", "--json"])
    assert len(json.loads(results.stdout)) == 3  # 2 + 1 new point, no re-run


def test_tune_json_and_winner(cli: CliRunner, tmp_path) -> None:  # type: ignore[no-untyped-def]
    space = tmp_path / "space.toml"
    space.write_text('slo = ["p99_ttft_ms<=5000"]\n[params]\nmax-num-seqs = [2, 8]\n')
    args = ["tune", "--space", str(space), "--trials", "2", "--study", "t1", "--json", *FAST]
    data = _json(cli.invoke(app, args))
    assert data["measured"] == 2 and data["constraints"] == ["p99_ttft_ms<=5000"]
    assert data["storage"].endswith("optuna.db")
    win = _json(cli.invoke(app, ["winner", "--study", "t1", "--json"]))
    assert win["constraints"] == ["p99_ttft_ms<=5000"]
    # Resuming with another objective is refused, not silently mixed.
    again = cli.invoke(app, [*args[: -len(FAST)], "--objective", "latency", *FAST])
    assert again.exit_code == 2 and "use the same --objective" in again.stderr
    # ... and so is another workload: its values would not be comparable.
    other = [*args, "--num-prompts", "8"]
    again = cli.invoke(app, other)
    assert again.exit_code == 2 and "another workload" in again.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["tune", "--trials", "2"], "nothing to search"),
        (["tune", "--trials", "2", "--param", "max-num-seqs"], "no '='"),
        (["tune", "--trials", "2", "--param", "max-num-seqs=1", "--slo", "fast"], "METRIC<=VALUE"),
        (
            ["tune", "--trials", "2", "--param", "max-num-seqs=1", "--objective", "speed"],
            "--objective",
        ),
        (
            ["tune", "--trials", "1", "--param", "max-num-seqs=1", "--storage", "nowhere"],
            "database URL",
        ),
        (["sweep", "max-num-seqs=int:1..1000"], "listed values"),
        (["sweep", "max-num-seqs=1,2", "--descent", "max-num-seqs=4"], "twice"),
        (["ab"], "both the base config"),
        (["ab", "--a-set", "max-num-seqs=1", "--order", "aabb"], "abba or abab"),
        (["winner"], "no trials"),
    ],
)
def test_bad_input_is_refused_with_a_fix(cli: CliRunner, args: list[str], needle: str) -> None:
    result = cli.invoke(app, [*args, *(FAST if args[0] != "winner" else [])])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr


def test_sweep_skips_a_rule_invalid_value_without_an_engine(cli: CliRunner) -> None:
    data = _json(
        cli.invoke(app, ["sweep", "max-model-len=16,2048", *FAST, "--study", "sw2", "--json"])
    )
    assert data["best_values"] == {"max-model-len": 2048}
    points = {p["value"]: p for p in data["steps"][0]["points"]}
    assert points[16]["statuses"] == ["skipped"] and points[16]["objective"] is None
    shown = json.loads(cli.invoke(app, ["show", points[16]["trials"][0], "--json"]).stdout)
    assert shown["log_path"] is None and shown["startup_seconds"] is None
