"""An A/B is replayed with the judgement it ran with (issue 28): confidence, smallest win, metrics.

``tunelab ab --min-effect``/``--confidence`` used to judge only the run: the
replays (``ab --report``, the TUI's compare, the report, the export's choice)
rebuilt the verdict at 95 % with no minimum, so one A/B had two verdicts. The
end-to-end tests run the real CLI on the study engine double and hold every
replay to the run's verdict; the unit tests cover stores that are old or hostile.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.support import study_cli
from tuner.bench.workload import Workload
from tuner.cli.app import app, register_all
from tuner.config import EngineConfig
from tuner.lab.study import Study
from tuner.report.data import collect
from tuner.studies.ab import build_report
from tuner.studies.ab_judgement import TAG, Judgement, judgement_from_tag
from tuner.studies.stats import Verdict
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.slots import FORCE_ENV
from tuner.trials.store import TrialStore, default_path

register_all(app)
FAST = study_cli.FAST
ARMS = ["--a-set", "max-num-seqs=1", "--b-set", "max-num-seqs=8"]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    # 10 ms between tokens: the double's physics dwarfs a busy box's scheduling noise.
    return study_cli.in_process(monkeypatch, **{FORCE_ENV: "0", "DOUBLE_TOKEN_MS": "10"})


def _replays(study: str) -> dict[str, tuple[str, str]]:
    """(verdict, summary) of every face that rebuilds the study's A/B from the store."""
    with TrialStore(default_path()) as store:
        view = Study(store, study)
        trials = view.trials()
        last = view.last_ab(trials)
        assert last is not None
        a = store.get(last.trials["A"][0])
        b = store.get(last.trials["B"][0])
        compared = view.compare(a, b).report
        chosen, why = view.export_choice()
        report = collect(view).ab
        assert report is not None and chosen is not None
    return {
        "last_ab": (str(last.verdict), last.summary()),
        "compare": (str(compared.verdict), compared.summary()),
        "report": (str(report.verdict), report.summary()),
        "export": ("B better" if chosen.arm == "B" else "not B", why),
    }


def test_a_min_effect_ab_replays_to_the_verdict_its_run_gave(cli: CliRunner) -> None:
    """B is 8 launches' worth faster; with a 20x smallest win nothing counts, everywhere."""
    run = cli.invoke(
        app, ["ab", *ARMS, "--repeats", "3", "--min-effect", "20", *FAST, "--study", "me", "--json"]
    )
    assert run.exit_code == 0, run.output
    ran = json.loads(run.stdout)
    # A 20x win is beyond the double's 8x: whatever the noise, no win.
    assert ran["verdict"] == "no significant difference", ran["summary"]
    if ran["metrics"][0]["rel_ci_low"] > 0:  # a real difference: only the smallest win held it
        assert "below the 2000.0% that counts as a win" in ran["summary"]
    # Every trial carries the judgement its A/B ran with.
    with TrialStore(default_path()) as store:
        tags = {json.dumps(t.tags[TAG], sort_keys=True) for t in store.list(study="me")}
    assert tags == {json.dumps(Judgement(0.95, 20.0).to_tag(), sort_keys=True)}
    stored = cli.invoke(app, ["ab", "--report", "--study", "me", "--json"])
    assert stored.exit_code == 0, stored.output
    assert json.loads(stored.stdout)["summary"] == ran["summary"]
    replays = _replays("me")
    assert {face: v for face, (v, _s) in replays.items()} == {
        "last_ab": "no significant difference",
        "compare": "no significant difference",
        "report": "no significant difference",
        "export": "not B",
    }
    assert all(s == ran["summary"] for face, (_v, s) in replays.items() if face != "export")
    assert ran["summary"] in replays["export"][1]
    # Judged with no minimum on purpose, the same stored trials are judged as a plain A/B
    # (a win whenever the interval excludes 0), and the report says it re-judged them.
    with TrialStore(default_path()) as store:
        trials = Study(store, "me").trials()
    rejudged = build_report(trials, study="me", objective="output_throughput", min_rel_effect=0.0)
    plain = rejudged.objective_row
    assert plain is not None
    assert (rejudged.verdict is Verdict.B_BETTER) == ((plain.rel_ci_low or 0) > 0)
    assert "re-judged with 95% intervals; the A/B ran with 95% intervals, a win from 2000.0%" in (
        rejudged.notes
    )


def test_a_sequential_ab_applies_the_smallest_win_to_its_stop(cli: CliRunner) -> None:
    args = ["ab", *ARMS, "--max-repeats", "3", "--min-effect", "20", "--confidence", "0.9"]
    run = cli.invoke(app, [*args, *FAST, "--study", "sq", "--json"])
    assert run.exit_code == 0, run.output
    ran = json.loads(run.stdout)
    assert ran["verdict"] == "no significant difference", ran["summary"]
    if ran["stopped"] == "different":  # it stopped on a real difference, not a 20x one
        assert "below the 2000.0%" in ran["summary"]
    replays = _replays("sq")
    assert {v for face, (v, _s) in replays.items() if face != "export"} == {
        "no significant difference"
    }
    assert all(s == ran["summary"] for face, (_v, s) in replays.items() if face != "export")
    # The other metrics' rows keep the run's 90 % level too.
    with TrialStore(default_path()) as store:
        last = Study(store, "sq").last_ab()
    assert last is not None
    assert {r.confidence for r in last.rows[1:]} == {0.9}
    # The table's interval column says the level it was judged at, in the run and the replay.
    assert ran["confidence"] == 0.9
    shown = cli.invoke(app, ["ab", "--report", "--study", "sq"])
    assert shown.exit_code == 0, shown.output
    assert "B vs A [90% CI]" in shown.output and "95% CI" not in shown.output


def _trial(arm: str, value: float, tags: dict[str, object]) -> Trial:
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": 1 if arm == "A" else 8}),
        workload=Workload(),
        study="s",
        status=TrialStatus.DONE,
        results={"output_throughput": value},
        arm=arm,
        repeat=0,
        tags=dict(tags),
    )


def _arms(tags: dict[str, object]) -> list[Trial]:
    """B is +3 % over A, tightly: significant at 95 %, below a 5 % smallest win."""
    return [
        *(_trial("A", v, tags) for v in (100.0, 100.2, 99.8)),
        *(_trial("B", v, tags) for v in (103.0, 103.1, 102.9)),
    ]


def test_the_stored_judgement_decides_and_an_old_or_broken_one_is_named() -> None:
    judged = Judgement(0.95, 0.05).to_tag()
    report = build_report(
        _arms({"kind": "ab", TAG: judged}), study="s", objective="output_throughput"
    )
    assert report.verdict is Verdict.NO_DIFFERENCE and "below the 5.0%" in report.summary()
    assert not [n for n in report.notes if "judg" in n]
    # Stored before the judgement was kept: the defaults, said aloud.
    old = build_report(_arms({"kind": "ab"}), study="s", objective="output_throughput")
    assert old.verdict is Verdict.B_BETTER
    assert any("stored before tunelab kept how it was judged" in n for n in old.notes)
    # Hand-edited or hostile: the defaults, and which trial's tag was refused.
    for bad in ({"confidence": 7}, {"confidence": 0.9, "metrics": "all"}, "x", {}):
        broken = build_report(
            _arms({"kind": "ab", TAG: bad}), study="s", objective="output_throughput"
        )
        assert broken.verdict is Verdict.B_BETTER
        assert any("cannot be used" in n for n in broken.notes), (bad, broken.notes)
    # Plain runs compared as a pool are no A/B: no note at all.
    plain = build_report(_arms({}), study="s", objective="output_throughput")
    assert plain.notes == [] and plain.verdict is Verdict.B_BETTER


def test_a_judgement_round_trips_through_its_tag() -> None:
    j = Judgement(0.99, 0.02, ("output_throughput", "p99_ttft_ms"))
    assert judgement_from_tag(j.to_tag()) == j
    assert judgement_from_tag(json.loads(json.dumps(j.to_tag()))) == j
    with pytest.raises(ValueError, match="min_rel_effect"):
        judgement_from_tag({"confidence": 0.95, "min_rel_effect": float("nan")})
