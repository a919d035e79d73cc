"""A search does not launch the points the study model is sure miss the SLO (issue 31).

The rule (tuner.studies.search_skip) is held to trials whose figures follow known step costs
(so the model's leave-one-out errors are nil and its sure interval is the floor), then to a
group with one badly-off trial (the interval widens and the near misses run again). The
search is run on the study engine double, whose physics the model describes: what the model
did not launch is stored as skipped without an engine, told to Optuna as a miss with the
model's figures, left out of the launch budget, and printed by the CLI as the core
describes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.search_double import search_on_double
from tests.test_perfmodel import COSTS, point
from tests.test_perfmodel import trial as made_trial
from tuner.perfmodel.simulate import replay
from tuner.studies.search_skip import SKIP_TAG, describe_skip, is_model_skip, sure_miss
from tuner.studies.space import parse_constraint
from tuner.trials.events import TrialSkipped
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

MEASURED = ((4, 2), (4, 8), (16, 8), (16, 32), (64, 32))


def _measured(seqs: int, conc: int, ttft_off: float = 1.0) -> Trial:
    """A done trial whose figures are the replay of COSTS (its TTFT off by ``ttft_off``)."""
    t = made_trial("s", seqs, conc)
    run = replay(point(seqs, 2048, conc), COSTS.a, COSTS.b, COSTS.c)
    ttft = run.metric("p99_ttft_ms")
    assert t.results is not None and ttft is not None
    t.results["p99_ttft_ms"] = ttft * ttft_off
    return t


def _candidate(seqs: int, conc: int) -> Trial:
    t = made_trial("s", seqs, conc)
    t.status, t.results, t.server = TrialStatus.QUEUED, None, None
    return t


def test_a_point_is_skipped_only_when_its_whole_sure_interval_misses() -> None:
    study = [_measured(s, c) for s, c in MEASURED]
    bound = [parse_constraint("p99_ttft_ms<=100")]
    # 32 users on 4 sequences queue seven waves deep: ~1,011 ms p99 TTFT; on 8, ~486 ms.
    far = sure_miss(study, _candidate(4, 32), bound)
    assert far is not None and far.constraint == "p99_ttft_ms<=100"
    assert far.predicted == pytest.approx(1010.8, rel=0.01)
    assert far.low == pytest.approx(far.predicted / 1.25) and far.low > 100
    assert "misses p99_ttft_ms<=100" in far.reason() and "from 5 measured trials" in far.reason()
    assert sure_miss(study, _candidate(8, 32), bound) is not None
    # Predicted to meet (~75 ms), and a miss whose sure interval reaches the bound: both run.
    assert sure_miss(study, _candidate(64, 64), bound) is None
    assert sure_miss(study, _candidate(8, 32), [parse_constraint("p99_ttft_ms<=400")]) is None
    # A lower bound on throughput: 942 tok/s on 2 sequences is sure to miss 3,000.
    slow = sure_miss(study, _candidate(2, 32), [parse_constraint("output_throughput>=3000")])
    assert slow is not None and slow.high < 3000
    # Too few trials like it, or a key the replay cannot tell: nothing is sure.
    assert sure_miss(study[:3], _candidate(4, 32), bound) is None
    assert sure_miss(study, _candidate(4, 32), [parse_constraint("failed<=0")]) is None


def test_a_model_that_was_off_on_a_measured_trial_widens_and_skips_less() -> None:
    bound = [parse_constraint("p99_ttft_ms<=100")]
    noisy = [_measured(s, c, ttft_off=3.0 if (s, c) == (16, 32) else 1.0) for s, c in MEASURED]
    # Off 3x on one trial: the sure interval is now ~5x either way; 486 ms is no longer sure
    # to miss 100, 2,041 ms still is.
    assert sure_miss(noisy, _candidate(8, 32), bound) is None
    far = sure_miss(noisy, _candidate(2, 32), bound)
    assert far is not None and far.high / far.predicted > 4


def test_a_search_on_the_double_does_not_launch_the_sure_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import optuna

    from tuner.cli.study_output import print_search

    done = search_on_double(tmp_path, monkeypatch, n_trials=12, seed=1, propose=False)
    report, trials, url, events = done.report, done.trials, done.url, done.events
    skipped = [t for t in trials if is_model_skip(t)]
    launched = [t for t in trials if t.status is not TrialStatus.SKIPPED]
    print([(t.tags["values"], str(t.status)) for t in trials])
    assert skipped, "the model skipped nothing"
    assert len(launched) == 12 == report.measured + report.failed + report.stopped_early
    assert len(report.skipped) == len(skipped)
    # Each announced as it was decided, with the stored reason (the faces print the event).
    said = {e.trial.id: e.reason for e in events if isinstance(e, TrialSkipped)}
    assert said == {t.id: t.failure_reason for t in skipped}
    for t in skipped:
        values = t.tags["values"]
        # On the double a load above max-num-seqs queues a whole generation: ~160 ms TTFT.
        assert values["concurrency"] > values["max-num-seqs"], values
        assert t.log_path is None and t.tags[SKIP_TAG]["low"] > 100
        assert t.failure_reason and "--no-skip" in t.failure_reason
    study = optuna.load_study(study_name="s", storage=url)
    by_id = {f.user_attrs.get("tunelab_trial_id"): f for f in study.trials}
    for t in skipped:
        # Told as a measured miss would be, with the model's figures, marked as the model's.
        frozen, verdict = by_id[t.id], t.tags[SKIP_TAG]
        assert frozen.state is optuna.trial.TrialState.COMPLETE and SKIP_TAG in frozen.user_attrs
        assert frozen.values == [pytest.approx(verdict["values"]["output_throughput"])]
        assert frozen.user_attrs["meets_slo"] is False and frozen.user_attrs["constraints"][0] > 0
    assert report.best and report.best[0]["tunelab_trial_id"] not in {t.id for t in skipped}
    print_search(report)
    out = " ".join(capsys.readouterr().out.split())  # the console wraps at its width
    assert f"{len(skipped)} not launched (the study model is sure they miss the SLO)" in out
    assert all(" ".join(describe_skip(s).split()) in out for s in report.skipped)


def test_a_recovered_skip_is_told_as_the_search_told_it(tmp_path: Path) -> None:
    """A worker killed between storing a skip and telling Optuna: recovery tells the stored
    verdict the same way (tuner.studies.search.tell_outcome, the one teller)."""
    import optuna

    from tuner.studies.search import tell_outcome
    from tuner.studies.search_skip import record_skip

    bound = [parse_constraint("p99_ttft_ms<=100")]
    study = [_measured(s, c) for s, c in MEASURED]
    candidate = _candidate(4, 32)
    verdict = sure_miss(study, candidate, bound, ["output_throughput"])
    assert verdict is not None and "output_throughput" in verdict.values
    with TrialStore(tmp_path / "t.db") as store:
        record_skip(store, candidate, verdict)
        stored = store.get(candidate.id)
    opt = optuna.create_study(directions=["maximize"])
    ot = opt.ask()
    state = tell_outcome(opt, ot, stored, ["output_throughput"], bound)
    frozen = opt.trials[0]
    assert state is optuna.trial.TrialState.COMPLETE and frozen.state is state
    assert frozen.values == [pytest.approx(verdict.values["output_throughput"])]
    assert frozen.user_attrs["constraints"][0] > 0 and SKIP_TAG in frozen.user_attrs
