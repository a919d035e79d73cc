"""``tunelab results --vllm-sweep DIR``: a study in `vllm bench sweep`'s layout, read by vLLM.

The study is a real sweep with repeats on the study engine double (through
the real CLI, as test_studies_cli.py runs it); the export is then read by the
installed vLLM's own ``vllm bench sweep plot`` and ``plot_pareto`` modules, in
a subprocess (tunelab never imports vllm in-process). What each file holds is
checked against the trials the store returns, not against a copy of the
export's logic.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tuner.bench.workload import Workload
from tuner.cli.app import app, register_all
from tuner.config import EngineConfig
from tuner.trials.model import PRUNED_TAG, Trial, TrialStatus
from tuner.trials.store import TrialStore
from tuner.trials.vllm_sweep import DEFAULT, unset_value

register_all(app)
FAST = study_cli.FAST


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    return study_cli.in_process(monkeypatch)


# vLLM's sweep tools run as their ``__main__`` blocks do (their own argument parsers),
# both in one interpreter so vLLM is imported once.
_RUN_VLLM_TOOLS = """
import json, sys
from vllm.benchmarks.sweep import plot, plot_pareto
from vllm.utils.argparse_utils import FlexibleArgumentParser
for module, argv in json.loads(sys.argv[1]):
    tool = {"plot": plot.SweepPlotArgs, "plot_pareto": plot_pareto.SweepPlotParetoArgs}[module]
    parser = tool.add_cli_args(FlexibleArgumentParser())
    {"plot": plot, "plot_pareto": plot_pareto}[module].main(parser.parse_args(argv))
    print(f"[TOOL DONE] {module}", flush=True)
"""


def _vllm_tools(*calls: tuple[str, list[str]]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _RUN_VLLM_TOOLS, json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )


def test_a_sweep_with_repeats_exports_in_vllms_layout_and_vllm_plots_it(
    cli: CliRunner, tmp_path: Path
) -> None:
    args = ["sweep", "max-num-seqs=1,8", "--repeats", "2", *FAST, "--study", "sw", "--json"]
    done = cli.invoke(app, args)
    assert done.exit_code == 0, done.output
    stored = json.loads(cli.invoke(app, ["results", "--study", "sw", "--json"]).stdout)
    assert len(stored) == 4

    out = tmp_path / "exp"
    written = cli.invoke(app, ["results", "--study", "sw", "--vllm-sweep", str(out), "--json"])
    assert written.exit_code == 0, written.output
    report = json.loads(written.stdout)
    assert report["runs"] == 4 and report["serve_keys"] == ["max_num_seqs"]
    assert report["bench_keys"] == []  # every point ran the same workload
    assert sorted(report["combinations"]) == [
        "SERVE--max_num_seqs=1",
        "SERVE--max_num_seqs=8",
    ]

    by_id = {t["id"]: t for t in stored}
    seen = set()
    for name in report["combinations"]:
        folder = out / name
        runs = sorted(folder.glob("run=*.json"))
        assert [p.name for p in runs] == ["run=0.json", "run=1.json"]
        summary = json.loads((folder / "summary.json").read_text())
        assert summary == [json.loads(p.read_text()) for p in runs]
        for number, record in enumerate(summary):
            trial = by_id[record["tunelab"]["trial_id"]]
            seen.add(trial["id"])
            assert record["run_number"] == number
            # The knob as vLLM's serve params spell it, equal to what the trial ran.
            assert record["max_num_seqs"] == trial["config"]["engine"]["max-num-seqs"]
            assert f"max_num_seqs={record['max_num_seqs']}" in name
            # The result is the stored one, under `vllm bench serve`'s keys.
            for key in ("output_throughput", "p99_ttft_ms", "completed", "max_concurrency"):
                assert record[key] == trial["results"][key]
            assert len(record["date"]) == 15 and record["date"][8] == "-"  # %Y%m%d-%H%M%S
            assert record["tunelab"]["started_at"].startswith(record["date"][:4])
    assert seen == set(by_id)
    with (out / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {r["max_num_seqs"] for r in rows} == {"1", "8"}

    # vLLM's own plot reads it: one curve per max_num_seqs, throughput against latency.
    plot_args = ["--curve-by", "max_num_seqs", "--var-x", "output_throughput"]
    plot_args += ["--var-y", "p99_ttft_ms", "--fig-dpi", "40", "--fig-height", "2"]
    tools = _vllm_tools(
        ("plot", [str(out), *plot_args]),
        ("plot_pareto", [str(out), "--label-by", "max_num_seqs"]),
    )
    assert tools.returncode == 0, tools.stderr[-3000:]
    assert "[TOOL DONE] plot_pareto" in tools.stdout and "[END FIGURE]" in tools.stdout
    assert list(out.glob("*.png")), tools.stdout
    assert list((out / "pareto").glob("*.png")), tools.stdout


def _stored(study: str, status: TrialStatus, engine: dict, tags: dict | None = None) -> Trial:
    with TrialStore() as store:
        trial = Trial(
            config=EngineConfig(model="m", engine=engine),
            workload=Workload(input_len=8, output_len=8, num_prompts=4, concurrency=2),
            study=study,
            tags=dict(tags or {}),
        )
        store.add(trial)
        if status is TrialStatus.DONE:
            trial = store.save_result(trial, {"output_throughput": 10.0, "completed": 4})
        else:
            trial = store.update_status(trial, status)
    return trial


def test_failed_and_pruned_trials_are_named_not_written_and_a_full_dir_is_kept(
    cli: CliRunner, tmp_path: Path
) -> None:
    ok = _stored("mix", TrialStatus.DONE, {"max-num-seqs": 4})
    unset = _stored("mix", TrialStatus.DONE, {"tensor-parallel-size": 1})
    failed = _stored("mix", TrialStatus.FAILED, {"max-num-seqs": 8})
    pruned = _stored("mix", TrialStatus.DONE, {"max-num-seqs": 16}, {PRUNED_TAG: {"why": "x"}})
    out = tmp_path / "exp"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    refused = cli.invoke(app, ["results", "--study", "mix", "--vllm-sweep", str(out)])
    assert refused.exit_code == 2 and "--force" in refused.output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]  # nothing half-written

    done = cli.invoke(app, ["results", "--study", "mix", "--vllm-sweep", str(out), "--force"])
    assert done.exit_code == 0, done.output
    assert f"left out {failed.id[:8]}: failed" in done.output
    assert f"left out {pruned.id[:8]}: pruned" in done.output
    records = [json.loads(p.read_text()) for p in out.rglob("summary.json")]
    runs = {r["tunelab"]["trial_id"]: r for group in records for r in group}
    assert set(runs) == {ok.id, unset.id}
    # A knob one run leaves to vLLM: vLLM's default where the catalogue knows it, else "default".
    assert runs[unset.id]["max_num_seqs"] == unset_value("max_num_seqs")
    assert runs[ok.id]["tensor_parallel_size"] == 1 == unset_value("tensor_parallel_size")
    assert unset_value("no_such_knob") == DEFAULT
    assert not (out / "mine.txt").exists()


def test_nothing_finished_is_a_usage_error(cli: CliRunner, tmp_path: Path) -> None:
    _stored("empty", TrialStatus.FAILED, {"max-num-seqs": 8})
    out = tmp_path / "exp"
    result = cli.invoke(app, ["results", "--study", "empty", "--vllm-sweep", str(out)])
    assert result.exit_code == 2 and "no finished trial" in result.output
    assert not out.exists()
