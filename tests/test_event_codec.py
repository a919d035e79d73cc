"""Trial events as JSON lines (issue 18): what a detached study writes, a TUI reads back equal.

Every member of ``TrialEvent`` must survive the file: a TUI that attached to a
service job posts the decoded events to the same panels, so an event type the
codec misses would vanish from the screen of a re-attached TUI.
"""

from __future__ import annotations

import json
import os
import time
import typing
from pathlib import Path

import pytest

from tuner.bench.progress import BenchProgress
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules.types import Finding, Severity
from tuner.service.jobs import JobTable
from tuner.trials import event_codec
from tuner.trials import events as ev
from tuner.trials.model import Trial, TrialStatus


def _trial(status: TrialStatus = TrialStatus.DONE) -> Trial:
    trial = Trial(
        config=EngineConfig("org/model", env={"VLLM_X": "1"}, engine={"max-num-seqs": 8}),
        workload=Workload(input_len=16, output_len=8, num_prompts=4, concurrency=2),
        study="s",
    )
    trial.status = status
    trial.results = {"output_throughput": 123.5, "completed": 4}
    return trial


def _one_of_each() -> list[ev.TrialEvent]:
    finding = Finding(Severity.ERROR, ("max-num-seqs",), "too small", "guide §1", {"x": 1}, "r1")
    slot = ev.SlotState("GPU 0,1", "t1", "A1", "measuring", 3, 8, (0, 1))
    return [
        ev.TrialQueued("t1", "s"),
        ev.TrialStage("t1", "ready", "http://x"),
        ev.TrialProgress("t1", BenchProgress("running", 3, 0, 8, 1.5, 200.0, 10.0, 20.0, None)),
        ev.TrialLog("t1", "INFO line"),
        ev.TrialBackend("t1", "TORCH_SDPA", "CPU_ATTN", True),
        ev.TrialDone(_trial()),
        ev.TrialFailed(_trial(TrialStatus.FAILED), "engine died"),
        ev.TrialPruned(_trial(TrialStatus.INTERRUPTED), "pruned: dominated"),
        ev.TrialSkipped(_trial(TrialStatus.SKIPPED), (finding,)),
        ev.TrialSkipped(_trial(TrialStatus.SKIPPED), (), "not launched: the study model ..."),
        ev.StudyStatus("s", "ab", 1, 6, 1, 0, 0, 1, 3, (slot,), 12.5, None, "look 1"),
    ]


def test_every_event_type_survives_a_json_line() -> None:
    events = _one_of_each()
    assert {type(e) for e in events} == set(typing.get_args(ev.TrialEvent))
    for event in events:
        line = json.dumps(event_codec.encode(event))
        assert event_codec.decode(json.loads(line)) == event, type(event).__name__


def test_unknown_or_torn_lines_are_errors_the_reader_skips(tmp_path: Path) -> None:
    with pytest.raises(event_codec.EventDecodeError, match="unknown event type"):
        event_codec.decode({"type": "FromTheFuture"})
    with pytest.raises(event_codec.EventDecodeError, match="TrialStage"):
        event_codec.decode({"type": "TrialStage", "nope": 1})
    rows = [{"type": "FromTheFuture"}, event_codec.encode(ev.TrialLog("t", "kept"))]
    assert [s.event for s in event_codec.decode_all(rows)] == [ev.TrialLog("t", "kept")]


def test_the_reader_takes_whole_lines_only_and_resumes_at_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = event_codec.EventWriter.open(path)
    first, second = ev.TrialLog("t", "one"), ev.TrialStage("t", "warmup")
    before = time.time()
    writer(first)
    time.sleep(0.05)
    writer(second)
    after = time.time()
    writer.close()
    whole = path.read_bytes()
    third = json.dumps(event_codec.encode(ev.TrialLog("t", "three"))).encode()
    with open(path, "ab") as out:
        out.write(third[:10])  # a line still being written
    rows, offset = event_codec.read_lines(path, 0)
    stamped = list(event_codec.decode_all(rows))
    assert [s.event for s in stamped] == [first, second] and offset == len(whole)
    # Each line carries when it was written: a replay shows the real gaps between events.
    t1, t2 = (s.at for s in stamped)
    assert t1 is not None and t2 is not None
    assert before - 0.01 <= t1 < t2 <= after + 0.01 and t2 - t1 >= 0.04
    with open(path, "ab") as out:
        out.write(third[10:] + b"\n")
    rows, offset2 = event_codec.read_lines(path, offset)
    # A line without a time (written by hand here) still decodes, with no time.
    assert list(event_codec.decode_all(rows)) == [(ev.TrialLog("t", "three"), None)]
    assert offset2 == path.stat().st_size
    assert event_codec.read_lines(tmp_path / "missing.jsonl", 7) == ([], 7)
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_job_is_told_where_its_events_go(tmp_path: Path) -> None:
    """The service sets the event file for each job it starts (a study command tees to it)."""
    import sys
    import time

    table = JobTable(tmp_path)
    code = f"import os; print('EVENTS=' + os.environ[{event_codec.EVENTS_ENV!r}])"
    job = table.submit([sys.executable, "-c", code], "print", str(tmp_path), dict(os.environ))
    end = time.monotonic() + 30
    while not job.state.ended:
        assert time.monotonic() < end, "the job did not end"
        time.sleep(0.1)
        table.pump()
    assert f"EVENTS={table.events_path(job)}" in table.log_path(job).read_text()


def test_hostile_event_lines_are_skipped_not_raised(tmp_path: Path) -> None:
    """An event file is foreign input (issue 26): deep, non-object or ill-typed lines are no event."""
    done = event_codec.encode(ev.TrialDone(_trial()))
    ill_typed = {**done, "trial": {**done["trial"], "results": "abc"}}
    huge = {**done, "trial": {**done["trial"], "created_at": 10**400}}
    deep_inside = json.dumps(done).replace('"completed": 4', '"completed": ' + "[" * 70 + "]" * 70)
    lines = [
        "[" * 100_000 + "]" * 100_000,
        '{"type": "TrialLog", "trial_id": ' + '{"a":' * 100_000 + "1" + "}" * 100_000 + "}",
        "5",
        '"text"',
        "[1, 2]",
        "null",
        json.dumps(ill_typed),
        json.dumps(huge),
        deep_inside,
        json.dumps(event_codec.encode(ev.TrialQueued("t1", "s"))),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    rows, offset = event_codec.read_lines(path, 0)
    assert offset == path.stat().st_size
    assert [type(s.event) for s in event_codec.decode_all(rows)] == [ev.TrialQueued]
    # Rows that come from a peer (the service's answer) need not be objects either.
    assert list(event_codec.decode_all([5, "x", None, [1], ill_typed])) == []  # type: ignore[list-item]
