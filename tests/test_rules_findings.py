"""Findings cross the store boundary as dicts and come back typed (issue 12 typed seams).

A trial stores its findings in ``Finding.to_dict`` form; code that reads them
back uses ``Finding.from_dict`` and compares ``Severity`` members rather than
the word "error". The round trip must be exact for every finding the rules
produce, and a row that is not a finding is a message, never a KeyError.
"""

from __future__ import annotations

import json

import pytest

from tuner.config import EngineConfig
from tuner.rules import Finding, Severity, Target, check
from tuner.rules.types import FindingFormatError

CASES = [
    (
        EngineConfig(
            "org/m",
            env={"VLLM_ROCM_USE_AITER_MHA": "1", "VLLM_NOT_A_KNOB": "1"},
            engine={"attention-backend": "FLASHMLA", "cudagraph-mode": "FULL"},
        ),
        Target("0.32.0", "rocm", 8, 192.0, env_vars=frozenset({"VLLM_ROCM_USE_AITER"})),
    ),
    (
        EngineConfig("org/m", engine={"kv-cache-dtype": "fp8_e5m2", "max-num-seqs": 4}),
        Target("0.12.0", "cuda", 8, 80.0),
    ),
]


def test_every_finding_survives_the_json_round_trip() -> None:
    findings = [f for config, target in CASES for f in check(config, None, target)]
    assert len({f.severity for f in findings}) >= 2  # errors and warnings/advice both seen
    for finding in findings:
        stored = json.loads(json.dumps(finding.to_dict()))
        back = Finding.from_dict(stored)
        assert back == finding
        assert back.severity is finding.severity


def test_severity_rank_puts_errors_first() -> None:
    assert [s.rank for s in (Severity.ERROR, Severity.WARNING, Severity.ADVICE)] == [0, 1, 2]


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (["error"], "is a table, not list"),
        ({"severity": "fatal", "message": "m"}, "severity 'fatal' is not one of"),
        ({"message": "m"}, "severity None"),
        ({"severity": "error", "knobs": "VLLM_X"}, "knobs must be a list"),
        ({"severity": "error", "knobs": [1]}, "knobs must be a list"),
        ({"severity": "warning", "fix": ["x"]}, "fix must be a table"),
        ({"severity": "advice", "message": 3}, "message must be text"),
    ],
)
def test_a_row_that_is_not_a_finding_is_a_message(row: object, needle: str) -> None:
    with pytest.raises(FindingFormatError, match=needle):
        Finding.from_dict(row)


def test_missing_optional_fields_read_as_empty() -> None:
    back = Finding.from_dict({"severity": "advice"})
    assert back == Finding(Severity.ADVICE, (), "", "", None, "")
