"""A search launches the point the study model predicts beats every measured one (issue 31).

The proposal (tuner.studies.search_propose) is held to trials whose figures follow known step
costs, so its predictions are the replay's own: it names the best untried grid point predicted
to meet the SLO, never one predicted to miss it, nothing once the best is measured, and nothing
without enough trials or a grid. A search on the study engine double then shows the proposals
enqueued in Optuna, tagged on their trials, counted as launches and listed in the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.search_double import search_on_double
from tests.test_perfmodel import COSTS, point
from tests.test_search_skip import MEASURED, _candidate, _measured
from tuner.perfmodel.simulate import replay
from tuner.studies.common import meets, value_of
from tuner.studies.search_propose import (
    PROPOSE_TAG,
    best_proposal,
    describe_proposal,
    grid,
    values_key,
)
from tuner.studies.space import Space, parse_constraint, parse_param
from tuner.trials.model import Trial, TrialStatus

SEQS = (4, 8, 16, 32, 64)
CONCS = (2, 8, 16, 32, 64)


def _grid(done: list[Trial]) -> list[tuple[dict[str, int], Trial]]:
    tried = {(t.config.engine["max-num-seqs"], t.workload.concurrency) for t in done}
    return [
        ({"max-num-seqs": s, "concurrency": c}, _candidate(s, c))
        for s in SEQS
        for c in CONCS
        if (s, c) not in tried
    ]


def _tagged(trials: list[Trial]) -> list[Trial]:
    for t in trials:
        t.tags["values"] = {"max-num-seqs": t.config.engine["max-num-seqs"],
                            "concurrency": t.workload.concurrency}  # fmt: skip
    return trials


def _truth(seqs: int, conc: int) -> tuple[float, float]:
    """The throughput and p99 TTFT the known step costs give a point."""
    run = replay(point(seqs, 2048, conc), COSTS.a, COSTS.b, COSTS.c)
    ttft = run.metric("p99_ttft_ms")
    assert ttft is not None
    return COSTS.predict(point(seqs, 2048, conc)).output_throughput, ttft


def test_the_proposal_is_the_best_untried_point_predicted_to_meet_the_slo() -> None:
    study = _tagged([_measured(s, c) for s, c in MEASURED])
    slo = [parse_constraint("p99_ttft_ms<=100")]
    got = best_proposal(study, _grid(study), slo, "output_throughput")
    assert got is not None and got.trials == len(MEASURED)
    # The truth over the same untried grid: the fastest point whose TTFT meets 100 ms.
    feasible = {(s, c): _truth(s, c) for s in SEQS for c in CONCS if _truth(s, c)[1] <= 100}
    untried = {k: v for k, v in feasible.items() if k not in MEASURED}
    best = max(untried, key=lambda k: untried[k][0])
    assert (got.values["max-num-seqs"], got.values["concurrency"]) == best
    assert got.predicted["output_throughput"] == pytest.approx(untried[best][0], rel=1e-6)
    assert got.predicted["p99_ttft_ms"] <= 100
    measured_best = max(value_of(t, "output_throughput") or 0 for t in study if meets(t, slo))
    assert got.best == pytest.approx(measured_best)
    assert got.predicted["output_throughput"] > measured_best
    assert "p99_ttft_ms ~" in got.reason() and "from 5 measured trials" in got.reason()


def test_no_proposal_when_nothing_untried_is_predicted_better_or_the_model_cannot_say() -> None:
    slo = [parse_constraint("p99_ttft_ms<=100")]
    study = _tagged([_measured(s, c) for s, c in MEASURED])
    first = best_proposal(study, _grid(study), slo, "output_throughput")
    assert first is not None
    # Once the proposed point is measured, every untried point is predicted worse: none.
    done = _tagged([*study, _measured(first.values["max-num-seqs"], first.values["concurrency"])])
    again = best_proposal(done, _grid(done), slo, "output_throughput")
    assert (
        again is None or again.predicted["output_throughput"] > first.predicted["output_throughput"]
    )
    # An SLO nothing can meet, too few trials, a key the model cannot tell: nothing proposed.
    assert best_proposal(study, _grid(study), [parse_constraint("p99_ttft_ms<=1")],
                         "output_throughput") is None  # fmt: skip
    assert best_proposal(study[:3], _grid(study[:3]), slo, "output_throughput") is None
    assert best_proposal(study, _grid(study), [parse_constraint("failed<=0")],
                         "output_throughput") is None  # fmt: skip


def test_only_a_space_of_listed_points_is_gridded() -> None:
    listed = Space([parse_param("max-num-seqs=4,8"), parse_param("concurrency=int:1..3")])
    assert grid(listed) == [
        {"max-num-seqs": s, "concurrency": c} for s in (4, 8) for c in (1, 2, 3)
    ]
    assert grid(Space([parse_param("gpu-memory-utilization=float:0.8..0.9")])) is None
    assert grid(Space([parse_param("max-num-batched-tokens=int:256..65536")])) is None


def test_a_search_on_the_double_launches_the_models_proposals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import optuna

    from tuner.cli.study_output import print_search

    done = search_on_double(tmp_path, monkeypatch, n_trials=9, seed=1)
    report, trials, url, space = done.report, done.trials, done.url, done.space
    proposed = [t for t in trials if isinstance(t.tags.get(PROPOSE_TAG), dict)]
    assert proposed, "the model proposed nothing"
    assert len(report.proposed) == len(proposed)
    launched = [t for t in trials if t.status is not TrialStatus.SKIPPED]
    assert len(launched) == 9  # a proposal is a launch like any other
    for t in proposed:
        tag = t.tags[PROPOSE_TAG]
        assert tag["values"] == t.tags["values"] and t.status is TrialStatus.DONE
        assert tag["predicted"]["p99_ttft_ms"] <= 100  # proposed only when predicted to meet
    # A proposal is a point not tried before it, and Optuna's trial of it carries the proposal.
    ordered = sorted(trials, key=lambda t: t.created_at)
    for t in proposed:
        earlier = ordered[: ordered.index(t)]
        assert all(e.tags["values"] != t.tags["values"] for e in earlier), t.tags["values"]
    opt = optuna.load_study(study_name="s", storage=url)
    marked = {f.user_attrs["tunelab_trial_id"] for f in opt.trials if PROPOSE_TAG in f.user_attrs}
    assert marked == {t.id for t in proposed}
    # The report's entries are the trials' proposals with what they measured; the CLI prints
    # each as the core describes it.
    by_values = {values_key(t.tags["values"]): t for t in proposed}  # a proposal is untried
    assert len(by_values) == len(report.proposed)
    for entry in report.proposed:
        t = by_values[values_key(entry["values"])]
        assert entry["measured"] == pytest.approx(value_of(t, "output_throughput"))
        assert entry["met_slo"] == meets(t, space.constraints)
    print_search(report)
    out = " ".join(capsys.readouterr().out.split())  # the console wraps at its width
    assert f"{len(proposed)} launched as the study model's proposal" in out
    assert all(" ".join(describe_proposal(p).split()) in out for p in report.proposed)
