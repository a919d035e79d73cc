"""An SLO on every turn's TTFT for multi-turn sessions (issue 30).

A chat product promises its TTFT on every turn, and the later turns — whose prompts carry
the whole history — are the slow ones; the whole run's p99 blurs them with the quick first
turns. ``worst_turn_{median,p90,p99}_ttft_ms`` is each statistic's worst turn, computed once
(tuner.bench.sessions.worst_turn_metrics) from the per-turn figures the result stores, so a
capacity or a search can bound it. Checked here: the figure on known records, the SLO's checks
(a workload without turns is refused with its fix), and a capacity run through the real CLI
on the engine double with a preset's sessions workload, each probe's figure equal to the
worst of its stored turns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import study_cli
from tuner.bench.metrics import WORST_TURN_KEYS, percentile
from tuner.bench.record import RequestRecord
from tuner.bench.sessions import MIN_TURN_ANSWERS, worst_turn_metrics
from tuner.bench.workload import Workload
from tuner.cli.app import app, register_all
from tuner.studies.slo import SLOError, check_for_workload, parse_slo
from tuner.trials.model import WORKLOAD_REFUSED
from tuner.trials.store import TrialStore

register_all(app)


def _answered(turn: int, ttft_ms: float, session: int) -> RequestRecord:
    rec = RequestRecord(prompt_len=10 * turn, expected_output_len=4, session=session, turn=turn)
    rec.start, rec.chunk_times, rec.output_tokens = 0.0, [ttft_ms / 1e3, ttft_ms / 1e3 + 0.01], 2
    rec.end = rec.chunk_times[-1]
    return rec


def test_the_worst_turn_is_each_statistics_highest_turn() -> None:
    first = [_answered(1, ms, i) for i, ms in enumerate((10, 20, 30))]
    second = [_answered(2, ms, i) for i, ms in enumerate((100, 200, 300))]
    lone = [_answered(3, 5000, i) for i in range(MIN_TURN_ANSWERS - 1)]  # too few to count
    got = worst_turn_metrics([*first, *second, *lone])
    assert set(got) == set(WORST_TURN_KEYS)
    assert got["worst_turn_median_ttft_ms"] == pytest.approx(200)
    assert got["worst_turn_p99_ttft_ms"] == pytest.approx(percentile([100, 200, 300], 99))
    assert got["worst_turn_p90_ttft_ms"] == pytest.approx(percentile([100, 200, 300], 90))
    plain = RequestRecord(prompt_len=10, expected_output_len=4)
    assert worst_turn_metrics([plain]) == {}  # not a sessions run: no such figure


def test_a_per_turn_bound_needs_a_workload_with_turns() -> None:
    slo = parse_slo("worst_turn_p99_ttft_ms<=500")  # a result key the SLO accepts
    sessions = Workload(dataset_kind="sessions", turns=3, num_prompts=4)
    check_for_workload(slo.keys, sessions)
    with pytest.raises(SLOError) as err:
        check_for_workload(slo.keys, Workload())
    assert "no turns" in err.value.message and "--dataset-kind sessions" in (err.value.fix or "")
    with pytest.raises(SLOError):
        parse_slo("worst_turn_p42_ttft_ms<=500")


def test_capacity_bounds_every_turns_ttft_on_a_presets_sessions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_model_path: Path
) -> None:
    preset = tmp_path / "sessions.toml"
    preset.write_text(
        study_cli_preset(str(demo_model_path))
        + "\n[workload]\ninput_len = 16\noutput_len = 8\nnum_prompts = 6\nconcurrency = 2\n"
        'dataset_kind = "sessions"\nturns = 3\n'
    )
    cli = study_cli.in_process(monkeypatch, DOUBLE_TOKEN_MS="25")
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))
    slo = "worst_turn_p99_ttft_ms<=150"
    done = cli.invoke(app, ["capacity", "--preset", str(preset), "--warmup", "0", "--max", "16",
                            "--slo", slo, "--launches", "1", "--probes", "6", "--json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    # 4 sequences: a 5th conversation waits a whole 8-token generation (~200 ms) for its turn.
    assert data["capacity"]["mean"] == 4 and data["slo"] == slo
    with TrialStore() as store:  # the default store, under TUNELAB_HOME
        for probe in data["launches"][0]["probes"]:
            trial = store.get(probe["trial"])
            assert trial.results is not None
            turns = trial.results["tunelab"]["sessions"]["turns"]
            assert len(turns) == 3
            worst = max(t["p99_ttft_ms"] for t in turns if t["completed"] >= MIN_TURN_ANSWERS)
            assert trial.results["worst_turn_p99_ttft_ms"] == pytest.approx(worst)
            assert probe["met"] == (worst <= 150)
    # Without turns the same SLO is refused before any launch, with its fix.
    plain = cli.invoke(app, ["capacity", "--model", "engine-double", "--slo", slo])
    assert plain.exit_code == 2 and "no turns" in plain.stderr and "Traceback" not in plain.output


def study_cli_preset(model: str) -> str:
    return (
        '[preset]\nname = "double-sessions"\ndescription = "the double, conversations"\n'
        f'schema_version = 1\n\n[target]\nmodel = "{model}"\nvllm_version = "0.32.0"\n'
        'platform = "cpu"\ngpu_count = 0\n\n[env]\n\n[engine]\nmax-num-seqs = 4\n'
    )


def test_a_workload_that_cannot_run_fails_its_launch_once_not_every_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Conversations need a tokenizer, and the double's model has none: the first probe's
    benchmark refuses the workload, and its other loads are not run to fail alike (they were:
    every probe failed the same way and the answer read "capacity 0, even 1 missed it")."""
    preset = tmp_path / "sessions.toml"
    preset.write_text(
        study_cli_preset("engine-double")
        + "\n[workload]\ninput_len = 16\noutput_len = 8\nnum_prompts = 6\nconcurrency = 2\n"
        'dataset_kind = "sessions"\nturns = 3\n'
    )
    cli = study_cli.in_process(monkeypatch, DOUBLE_TOKEN_MS="25")
    done = cli.invoke(app, ["capacity", "--preset", str(preset), "--warmup", "0", "--max", "16",
                            "--slo", "worst_turn_p99_ttft_ms<=150", "--launches", "1",
                            "--probes", "6", "--json"])  # fmt: skip
    assert "Traceback" not in done.output
    with TrialStore() as store:
        trials = store.list()
    measured = [t for t in trials if (t.failure_reason or "").startswith(WORKLOAD_REFUSED)]
    assert len(measured) == 1 and "need a tokenizer" in (measured[0].failure_reason or "")
    rest = [t for t in trials if t is not measured[0]]
    assert rest and all(
        f"the same workload failed on trial {measured[0].short_id}" in (t.failure_reason or "")
        for t in rest
    )
    # The answer is the workload's error and its fix (exit 2, a user's input), not "capacity 0".
    assert done.exit_code == 2, done.output
    assert "need a tokenizer" in done.stderr and "fix the workload" in done.stderr
    assert "capacity 0" not in done.output and "even 1 missed" not in done.output
