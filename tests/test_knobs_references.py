"""Reference documents are shown by title, not file name (issue 14 item 7)."""

from __future__ import annotations

from pathlib import Path

from tuner.config import EngineConfig
from tuner.knobs.references import TITLES, cite
from tuner.rules import Target, WorkloadShape, check

REFERENCE = Path(__file__).parent.parent.parent / "shared" / "reference"


def test_cite_replaces_every_file_name_and_keeps_the_section() -> None:
    text = "000_cadfc2653427814e.txt §Configure --max-num-seqs; 004_c4561cd56ddb4be5.txt §CPX mode"
    shown = cite(text)
    assert shown == (
        "AMD vLLM V1 optimization guide §Configure --max-num-seqs; "
        "Steps to Run a vLLM Workload (MI300X CPX/NPS4) §CPX mode"
    )
    assert cite("vLLM source vllm/platforms/rocm.py") == "vLLM source vllm/platforms/rocm.py"


def test_titles_cover_the_shipped_reference_files() -> None:
    if REFERENCE.is_dir():
        assert {p.name for p in REFERENCE.glob("*.txt")} == set(TITLES)
    assert len(set(TITLES.values())) == len(TITLES)


def test_findings_name_documents_by_title() -> None:
    found = check(
        EngineConfig(model="m", engine={"max-num-batched-tokens": 2048}),
        None,
        Target("0.32.0", "rocm", 1, 192.0),
        WorkloadShape(512, 128, 8, "interactive"),
    )
    assert found
    for finding in found:
        assert ".txt" not in finding.source and ".txt" not in finding.message, finding
    assert any("AMD vLLM V1 optimization guide §" in f.source for f in found)
