"""A repeat of an A/B has one name on every face (issue 32): ``A1``, ``B2``, never ``A/0`` or ``B/None``.

The Run panel's launch labels, the A/B report's notes and failures, the study
report's rows and the Results table's config cell all read
:attr:`tuner.trials.model.Trial.arm_label`.
"""

from __future__ import annotations

from tui.jobs import ab_plan
from tui.widgets.results_table import knob_diff
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.report.data import TrialRow
from tuner.studies.ab import build_report
from tuner.studies.progress import trial_label
from tuner.trials.model import Trial, TrialStatus


def _trial(arm: str, repeat: int | None, status: TrialStatus = TrialStatus.DONE) -> Trial:
    return Trial(
        config=EngineConfig(model="m", engine={"max-num-seqs": 8 if arm == "B" else 1}),
        workload=Workload(),
        study="s",
        status=status,
        results={"output_throughput": 100.0} if status is TrialStatus.DONE else None,
        arm=arm,
        repeat=repeat,
        failure_reason=None if status is TrialStatus.DONE else "engine died",
    )


def test_every_face_names_the_second_b_launch_b2() -> None:
    b2 = _trial("B", 1)
    assert b2.arm_label == "B2"
    assert trial_label(b2) == "B2"  # the Run panel's slot and progress lines
    assert TrialRow(b2, [], {}, {}).label == "B2"  # the study report
    assert knob_diff(b2, None).startswith("B2 ")  # the Results table
    assert "B2" in ab_plan(2)  # the Run panel's launch plan, from the core's schedule
    failed = _trial("A", 0, TrialStatus.FAILED)
    report = build_report(
        [failed, _trial("A", 1), _trial("B", 0), b2], study="s", objective="output_throughput"
    )
    assert report.failures == ["A1: failed (engine died)"]


def test_a_trial_pooled_into_an_arm_has_no_repeat_number() -> None:
    pooled = _trial("B", None)
    assert pooled.arm_label == "B" and TrialRow(pooled, [], {}, {}).label == "B"
    assert "None" not in trial_label(pooled)
    assert _trial("", None).arm_label == ""
