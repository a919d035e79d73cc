"""BenchResult's typed reads agree with its JSON form (issue 12: typed values at the seams).

Code in the same process reads a finished run through BenchResult's properties
(completed, failed, total_output_tokens, failures, one_chunk_fraction,
delivery_warning) instead of turning it into a dict and reading keys back.
The dict (``to_dict``) stays the stored/printed form; these tests hold the two
to the same numbers, on hand-made records whose figures are known.
"""

from __future__ import annotations

from tuner.bench.client import RequestRecord
from tuner.bench.metrics import FailureSummary, compute_metrics, delivery_warning
from tuner.bench.runner import BenchResult
from tuner.bench.server_metrics import ServerSummary
from tuner.bench.workload import Workload


def _rec(times: list[float], out: int, kind: str = "", error: str = "") -> RequestRecord:
    rec = RequestRecord(
        prompt_len=10, expected_output_len=out, start=0.0, chunk_times=times, output_tokens=out
    )
    rec.error_kind, rec.error = kind, error
    return rec


def _result(records: list[RequestRecord]) -> BenchResult:
    return BenchResult(
        url="http://127.0.0.1:8000",
        model="m",
        workload=Workload(num_prompts=len(records)),
        metrics=compute_metrics(records, 2.0, None, detailed=True),
        server=ServerSummary(available=False),
        records=records,
    )


def test_typed_reads_match_the_json_form() -> None:
    records = [
        _rec([0.1, 0.15, 0.2, 0.25], 4),
        _rec([0.3], 2),  # two tokens in one piece
        _rec([], 3, "timeout", "no token for 30 s"),
        _rec([], 3, "HTTP 500", "internal error"),
        _rec([], 3, "timeout", "a later timeout"),
    ]
    result = _result(records)
    data = result.to_dict()
    assert (result.completed, result.failed, result.total_output_tokens) == (2, 3, 6)
    assert (result.completed, result.failed) == (data["completed"], data["failed"])
    assert result.total_output_tokens == data["total_output_tokens"]
    assert result.failures.counts == data["tunelab"]["failures"] == {"timeout": 2, "HTTP 500": 1}
    assert result.failures.examples == data["tunelab"]["failure_examples"]
    assert result.one_chunk_fraction == data["tunelab"]["one_chunk_fraction"] == 0.5
    assert result.delivery_warning(short=True) == delivery_warning(data, short=True)
    assert result.delivery_warning() is not None  # half the responses in one piece


def test_failure_description_names_the_first_kinds_with_counts() -> None:
    summary = FailureSummary(
        {"timeout": 5, "HTTP 500": 2, "disconnected": 1, "bad event": 1},
        {
            "HTTP 500": "internal error",
            "timeout": "no token for 30 s",
            "disconnected": "closed",
            "bad event": "not JSON",
        },
    )
    assert summary.describe() == (
        "2 x HTTP 500: internal error; 5 x timeout: no token for 30 s; 1 x disconnected: closed"
    )
    assert summary.describe(limit=1) == "2 x HTTP 500: internal error"
    assert FailureSummary({}, {}).describe() == "no detail"


def test_a_clean_run_has_no_failures_and_no_warning() -> None:
    result = _result([_rec([0.1, 0.2, 0.3], 3), _rec([0.1, 0.2], 2)])
    assert (result.completed, result.failed) == (2, 0)
    assert result.failures == FailureSummary({}, {})
    assert result.failures.describe() == "no detail"
    assert result.delivery_warning() is None
