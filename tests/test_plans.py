"""Study plans as data (issue 28): built by either face, checked once, stored with the study.

A plan decides a study's trials and verdict; the faces build one and hand it to
``tuner.lab.execute.execute``. These tests hold the three promises that make
that one path: a design no study could run is refused when the plan is built
(before any engine), the TUI's job spec and the CLI build the same plan for the
same request, and the design a study ran with is read back from the store (and
shown by ``tunelab results --study``), not remembered by whichever face asks.
The CLI runs here in-process on the study engine double (tests/support/study_cli.py).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tests.support.study_cli import FAST
from tuner.bench.workload import Workload
from tuner.cli.app import app, register_all
from tuner.config import EngineConfig
from tuner.lab import capacity as lab_capacity
from tuner.lab import plan_input
from tuner.lab.execute import describe, stored_plan, stored_plans
from tuner.lab.job_spec import ABJobSpec
from tuner.lab.plans import ABPlan, CapacityPlan, PlanError, SearchPlan, SweepPlan
from tuner.trials.store import TrialStore, default_path

register_all(app)

A = EngineConfig("org/m", {}, {"max-num-seqs": 4})
B = EngineConfig("org/m", {}, {"max-num-seqs": 8})
W = Workload(input_len=16, output_len=16, num_prompts=16, concurrency=8)
SLO = lab_capacity.parse("p99_ttft_ms<=500")


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (lambda: ABPlan(A, B, W, order="aabb"), "--order must be abba or abab"),
        (lambda: ABPlan(A, B, W, spending="never"), "--spending must be pocock, obf or front"),
        (
            lambda: SweepPlan(A, W, plan_input.sweep_params("max-num-seqs=4,8")[:1] * 2),
            "a knob is listed twice",
        ),
        (
            lambda: CapacityPlan(
                A, W, SLO, lab_capacity.grid(), b=B, sweep=plan_input.param("max-num-seqs=4,8")
            ),
            "--sweep and --b-set/--b-preset: choose one",
        ),
        (
            lambda: CapacityPlan(
                A, W, SLO, lab_capacity.grid(), sweep=plan_input.param("max-num-seqs=4")
            ),
            "two or more listed values",
        ),
        (
            lambda: SearchPlan(A, W, plan_input.Space(), 4, mode="fastest"),
            "--objective must be throughput",
        ),
    ],
    ids=["order", "spending", "knob twice", "sweep and b", "one value", "objective"],
)
def test_a_design_no_study_could_run_is_refused_when_the_plan_is_built(
    build: object, said: str
) -> None:
    with pytest.raises(PlanError) as caught:
        build()  # type: ignore[operator]
    assert said in caught.value.message
    assert caught.value.exit_code == 2


def test_the_tui_job_spec_and_the_cli_build_the_same_ab_plan() -> None:
    spec = ABJobSpec("s", None, A, B, W, repeats=4, startup_timeout=60.0)
    cli_plan = ABPlan(A, B, W, "s", repeats=4)
    assert spec.plan() == cli_plan
    assert spec.plan().to_dict() == cli_plan.to_dict()
    assert cli_plan.planned() == 8
    # The sequential design's ceiling, not the first look, is what the progress expects.
    assert ABPlan(A, B, W, max_repeats=6).planned() == 12
    assert ABPlan(A, B, W, equivalence=0.02).planned() == 12


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    return study_cli.in_process(monkeypatch)


def test_an_ab_from_the_cli_stores_its_design_and_results_shows_it(cli: CliRunner) -> None:
    ab = cli.invoke(
        app,
        [
            "ab",
            "--a-set",
            "max-num-seqs=4",
            "--b-set",
            "max-num-seqs=8",
            "--repeats",
            "2",
            "--confidence",
            "0.9",
            "--min-effect",
            "0.05",
            *FAST,
            "--study",
            "designed",
        ],
    )
    assert ab.exit_code == 0, ab.output
    with TrialStore(default_path()) as store:
        plan = stored_plan(store, "designed", "ab")
        kinds = list(stored_plans(store, "designed"))
    assert kinds == ["ab"]
    assert plan is not None
    assert (plan["repeats"], plan["confidence"], plan["min_effect"]) == (2, 0.9, 0.05)
    assert plan["a"]["engine"] == {"max-num-seqs": 4}
    assert plan["b"]["engine"] == {"max-num-seqs": 8}
    assert plan["workload"]["num_prompts"] == 16
    shown = cli.invoke(app, ["results", "--study", "designed"])
    assert shown.exit_code == 0, shown.output
    (line,) = [ln for ln in shown.output.splitlines() if ln.startswith("design ab:")]
    assert line == f"design {describe(plan)}"
    assert "confidence=0.9" in line and "min_effect=0.05" in line and "repeats=2" in line
    # Another study of the same store has no design of its own.
    other = cli.invoke(app, ["results", "--study", "nothing-here"])
    assert "design " not in other.output


def test_a_capacity_from_the_tui_entry_point_runs_the_same_plan_the_cli_stores(
    cli: CliRunner,
) -> None:
    ran = cli.invoke(
        app,
        [
            "capacity",
            "--slo",
            "p99_ttft_ms<=500",
            "--launches",
            "1",
            "--probes",
            "2",
            "--max",
            "8",
            *["--model", "engine-double", "--input-len", "16", "--output-len", "16"],
            *["--num-prompts", "16", "--warmup", "0"],
            "--study",
            "cap",
            "--json",
        ],
    )
    assert ran.exit_code in (0, 1), ran.output  # a capacity, or none met: the plan ran
    with TrialStore(default_path()) as store:
        plan = stored_plan(store, "cap", "capacity")
        probes = store.list(study="cap")
    assert plan is not None and plan["slo"] == "p99_ttft_ms<=500"
    assert (plan["launches"], plan["probes"]) == (1, 2)
    assert plan["grid"] == {"by": "concurrency", "step": 1.0, "start": 1.0, "limit": 8.0}
    assert len(probes) == 2
