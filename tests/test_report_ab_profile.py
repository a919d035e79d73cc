"""The report's "Why B is faster (profile)": the core's explanation, drawn and tabled (issue 29).

A profiled A/B is stored without an engine: each arm's first trial carries a
profile record whose summary is a *recorded real* vLLM CPU worker trace
(tests/data/traces: max-num-seqs 1 for arm A, 32 for arm B), read by
:func:`tuner.profiles.trace.profile_of` as the capture does. The report is then
written from the store by ``write_report`` and every figure it shows is
checked against the core's :class:`~tuner.studies.ab_explain.ArmsExplanation`
(built by ``build_report`` from the same stored trials), never recomputed
here. The chart's bars are found by their SVG group ids and measured from
their paths: one per family either arm spent time in, plus the unexplained
rest, each as long as its |B − A|.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any

import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.profiles.families import LABELS
from tuner.profiles.record import ProfileRecord
from tuner.profiles.trace import profile_of
from tuner.report import write_report
from tuner.report.data import largest_ops, shown_families
from tuner.report.markdown import _md
from tuner.report.plots import EXPLAIN_BAR_ID, UNEXPLAINED
from tuner.studies.ab import build_report
from tuner.studies.ab_explain import ArmsExplanation
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

TRACES = Path(__file__).parent / "data" / "traces"
STUDY = "ab-profiled"
HOSTILE = "<img src=x onerror=alert(1)>|`x`[l](javascript:y)"
FAILED = "vLLM wrote no worker trace into /x within 0 s"


def _profile(trace: str, name: str, hostile_op: str | None = None) -> dict[str, Any]:
    """A stored profile record of the recorded trace ``name`` (its top op renamed if asked)."""
    record = ProfileRecord(
        trace=trace,
        requests=4,
        concurrency=4,
        started_at=2.0,
        ended_at=3.0,
        measured_ended_at=1.0,
        summary=profile_of(TRACES / name, "cpu"),
    )
    data = record.to_dict()
    if hostile_op is not None:
        data["summary"]["top"]["gemm"][0][0] = hostile_op
    return data


def _store(a_profile: dict[str, Any] | None, b_profile: dict[str, Any] | None) -> None:
    """Two repeats per arm in the default store (the test's TUNELAB_HOME); repeat 0 profiled."""
    base = EngineConfig(model="org/m", engine={"max-num-seqs": 1})
    configs = {"A": base, "B": base.with_values({"max-num-seqs": 32})}
    throughput = {"A": (500.0, 510.0), "B": (5000.0, 4950.0)}
    wl = Workload(input_len=8, output_len=8, num_prompts=12, concurrency=4)
    now = time.time()
    with TrialStore() as store:
        for rep in range(2):
            for arm in ("A", "B"):
                trial = Trial(
                    configs[arm],
                    wl,
                    study=STUDY,
                    created_at=now + len(store.list(STUDY)),
                    arm=arm,
                    repeat=rep,
                    tags={
                        "kind": "ab",
                        "repeats": 2,
                        "profile": "capture" if rep == 0 else "armed",
                    },
                    profile=(a_profile if arm == "A" else b_profile) if rep == 0 else None,
                )
                store.add(trial)
                results = {"completed": 12, "failed": 0, "output_throughput": throughput[arm][rep]}
                store.save_result(trial, results)


def _core() -> ArmsExplanation:
    """The core's explanation of the stored A/B (what every face must show)."""
    with TrialStore() as store:
        report = build_report(store.list(STUDY), study=STUDY, objective="output_throughput")
    assert report.explanation is not None
    return report.explanation


def _bars(page: str) -> dict[str, float]:
    """Each explanation bar's drawn length in SVG units, by its group id's key."""
    bars = re.findall(rf'<g id="{EXPLAIN_BAR_ID}([\w]+)">\s*<path d="([^"]+)"', page)
    widths = {}
    for key, path in bars:
        xs = [float(x) for x in re.findall(r"[ML] ([-\d.]+) [-\d.]+", path)]
        widths[key] = max(xs) - min(xs)
    return widths


@pytest.fixture
def written(tmp_path: Path) -> tuple[str, str]:
    _store(
        _profile("/x/a.gz", "cpu-max-num-seqs-1.pt.trace.json.gz"),
        _profile(f"/x/{HOSTILE}.gz", "cpu-max-num-seqs-32.pt.trace.json.gz", hostile_op=HOSTILE),
    )
    out = write_report(tmp_path / "out", study=STUDY)
    return out.html.read_text(), out.markdown.read_text()


def test_the_page_draws_the_cores_explanation_by_family(written: tuple[str, str]) -> None:
    page, _ = written
    found = _core()
    ex = found.explanation
    assert ex is not None and ex.measured
    assert "<h2>Why B is faster (profile)</h2>" in page
    assert html.escape(found.summary()) in page
    # One bar per family either arm spent time in, and one for the unexplained rest.
    shown = shown_families(ex)
    assert 0 < len(shown) < len(ex.rows)  # this dense CPU model has no MoE, no collectives
    values = {r.family: r.delta_ms for r in shown} | {UNEXPLAINED: ex.unexplained_ms}
    widths = _bars(page)
    assert set(widths) == set(values)
    # Each bar as long as its |B − A|: ordered alike, and on one scale.
    by_width = sorted(widths, key=widths.__getitem__)
    assert by_width == sorted(values, key=lambda k: abs(values[k]))
    scale = widths[by_width[-1]] / abs(values[by_width[-1]])
    for key, width in widths.items():
        assert width == pytest.approx(scale * abs(values[key]), abs=1e-3)
    # The table: the core's figures per family, per token and (in brackets) per step.
    for r in shown:
        assert f"{r.a_ms:.3f} ({r.a_step_ms:.3f})" in page
        assert f"{r.delta_ms:+.3f}</td>" in page
        assert html.escape(LABELS[r.family]) in page
    assert f"{ex.unexplained_ms:+.3f}</td>" in page and f"{ex.total_ms:+.3f}</td>" in page
    assert found.a is not None and html.escape(found.a.describe()) in page


def test_hostile_trace_paths_and_op_names_are_escaped(written: tuple[str, str]) -> None:
    page, md = written
    found = _core()
    assert found.b is not None and HOSTILE in largest_ops(found.b, "gemm")
    assert HOSTILE in found.b.describe()
    assert "<img" not in page and "<img" not in md
    assert f"<code>{html.escape(HOSTILE)}</code>" in page
    assert html.escape(found.b.describe()) in page
    assert f"B: {_md(HOSTILE)}" in md and _md(found.b.describe()) in md
    # The row keeps its columns: the op name's "|" is escaped, not a cell border.
    (row,) = [line for line in md.splitlines() if line.startswith(f"| {_md(LABELS['gemm'])} |")]
    assert row.count("|") - row.count("\\|") == 6


def test_markdown_tables_the_cores_figures(written: tuple[str, str]) -> None:
    _, md = written
    found = _core()
    ex = found.explanation
    assert ex is not None
    assert "## Why B is faster (profile)" in md
    assert f"**{_md(found.summary())}**" in md
    for r in shown_families(ex):
        assert (
            f"| {_md(LABELS[r.family])} | {r.a_ms:.3f} ({r.a_step_ms:.3f}) | "
            f"{r.b_ms:.3f} ({r.b_step_ms:.3f}) | {r.delta_ms:+.3f} |"
        ) in md
    assert f"| unexplained | — | — | {ex.unexplained_ms:+.3f} |" in md
    assert f"| B − A measured | — | — | {ex.total_ms:+.3f} |" in md
    assert "| MoE |" not in md  # neither arm spent time there: left out


def test_a_failed_profile_shows_the_sentence_that_names_why(tmp_path: Path) -> None:
    _store(
        ProfileRecord(requests=4, concurrency=4, measured_ended_at=1.0, error=FAILED).to_dict(),
        _profile("/x/b.gz", "cpu-max-num-seqs-32.pt.trace.json.gz"),
    )
    out = write_report(tmp_path / "out", study=STUDY)
    page, md = out.html.read_text(), out.markdown.read_text()
    found = _core()
    assert found.explanation is None
    assert found.summary() == f"profile: no explanation (arm A's profile: {FAILED})"
    assert "<h2>Why B is faster (profile)</h2>" in page
    assert html.escape(found.summary()) in page and f"**{_md(found.summary())}**" in md
    assert EXPLAIN_BAR_ID not in page and "| family | A | B |" not in md


def test_an_unprofiled_ab_has_no_such_section(tmp_path: Path) -> None:
    _store(None, None)
    out = write_report(tmp_path / "out", study=STUDY)
    assert "Why B is faster" not in out.html.read_text()
    assert "Why B is faster" not in out.markdown.read_text()
