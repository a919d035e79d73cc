"""The guard where results are shown: the A/B line, the winner filter, the preset, the report.

Trials are stored through the store's own API with guard records built from
the typed model; every expectation is the verdict the pure comparison gives
for those records (tests/test_guard.py proves that comparison).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.test_guard import BASE, _probe, _run
from tests.test_trials_runner import trial
from tuner.config import EngineConfig
from tuner.export.preset import dump_preset
from tuner.export.trial import preset_from_trial
from tuner.guard import GuardRun, Verdict
from tuner.lab.study import Study
from tuner.report import collect, write_report
from tuner.trials.guard_check import ab_guard, baseline_trial, require_guard
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.store import TrialStore

# Prompt "a" diverges from token 2: drifted on 1/2 prompts.
DRIFTED = _run(_probe("a", [5, 6, 99, 98], [-0.1, -0.2, -0.3, -0.4]), BASE.probes[1])
# Same tokens, teacher-forced logprobs moved 0.01 on two tokens: close.
CLOSE = _run(
    _probe("a", [5, 6, 7, 8], [-0.11, -0.2, -0.3, -0.4], [-0.11, -0.21, -0.3, -0.4]),
    BASE.probes[1],
)
B_CONFIG = EngineConfig(model="stub-model", engine={"max-num-seqs": 64})


def _add(
    store: TrialStore,
    guard: GuardRun | None,
    *,
    arm: str | None = None,
    repeat: int = 0,
    config: EngineConfig | None = None,
    value: float = 10.0,
) -> Trial:
    t = trial()
    if config is not None:
        t.config = config
    t.study, t.arm, t.repeat = "s", arm, repeat
    t.guard = None if guard is None else guard.to_dict()
    store.add(t)
    return store.save_result(t, {"output_throughput": value, "completed": 12, "failed": 0})


def test_ab_line_says_b_outputs_against_a(tmp_path: Path) -> None:
    with TrialStore(tmp_path / "t.db") as store:
        a = [_add(store, BASE, arm="A", repeat=i) for i in range(2)]
        b_same = [_add(store, BASE, arm="B", repeat=i, config=B_CONFIG) for i in range(2)]
        assert (
            ab_guard(a, b_same).summary()
            == "outputs: same on 2/2 prompts, mean |Δlogprob| 0 (worst of 2 B runs)"
        )
        b_mixed = [
            _add(store, CLOSE, arm="B", config=B_CONFIG),
            _add(store, DRIFTED, arm="B", repeat=1, config=B_CONFIG),
            _add(store, None, arm="B", repeat=2, config=B_CONFIG),
        ]
        g = ab_guard(a, b_mixed)
        assert (
            g.verdict is Verdict.DRIFTED and g.reference is not None and g.reference.id == a[0].id
        )
        assert g.summary().startswith("outputs: drifted on 1/2 prompts from token 2")
        assert "(worst of 2 B runs; 1 not checked)" in g.summary()
        # A whose own repeats do not reproduce is said too: the comparison is then noise.
        a_noisy = [a[0], _add(store, CLOSE, arm="A", repeat=2)]
        assert "A's own repeats: close on 2/2 prompts" in ab_guard(a_noisy, b_same).summary()
        unguarded = [_add(store, None, arm="A", repeat=3)]
        assert ab_guard(unguarded, b_same).summary() == (
            "outputs: not checked (no A run has a usable output-guard record)"
        )
        assert ab_guard(unguarded, b_same).recorded
        bare_b = [_add(store, None, arm="B", repeat=4, config=B_CONFIG)]
        assert not ab_guard(unguarded, bare_b).recorded


def test_require_guard_filters_the_winner_candidates(tmp_path: Path) -> None:
    with TrialStore(tmp_path / "t.db") as store:
        base = _add(store, BASE)
        close = _add(store, CLOSE, value=12.0)
        drifted = _add(store, DRIFTED, value=20.0)
        bare = _add(store, None, value=30.0)
        pending = trial()
        pending.study = "s"
        store.add(pending)
        trials = store.list(study="s")
        ref = baseline_trial(store, "s")
        assert ref is not None and ref.id == base.id
        assert {t.id for t in require_guard(trials, None, ref).kept} == {t.id for t in trials}
        same = require_guard(trials, "same", ref)
        assert [t.id for t in same.kept] == [base.id, pending.id]
        assert [t.id for t, _ in same.dropped] == [close.id, drifted.id, bare.id]
        note = same.note() or ""
        assert note.startswith("--require-guard same left out 3 trials:")
        assert f"{drifted.short_id} (drifted on 1/2 prompts from token 2" in note
        assert "ran without the output guard" in note
        near = require_guard(trials, "close", ref)
        assert [t.id for t in near.kept] == [base.id, close.id, pending.id]
        assert near.dropped and require_guard([base], "same", ref).note() is None
        with pytest.raises(ValueError):
            require_guard(trials, "exact", ref)  # type: ignore[arg-type]


def test_exported_preset_carries_the_guard_table(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        base = _add(store, BASE)
        drifted = _add(store, DRIFTED)
        bare = _add(store, None)
    results = preset_from_trial(drifted.id, store_path=db).results or {}
    guard = results["guard"]
    assert guard["verdict"] == "drifted" and guard["probes"] == 2 and guard["tokens"] == 4
    assert guard["match_rate"] == 0.5 and guard["first_divergence"] == 2
    assert guard["baseline_trial"] == base.id
    assert guard["summary"].startswith("drifted on 1/2 prompts from token 2")
    # The TOML a user gets holds it, and reads back the same.
    text = dump_preset(preset_from_trial(drifted.id, store_path=db))
    assert "[results.guard]" in text
    assert tomllib.loads(text)["results"]["guard"]["verdict"] == "drifted"
    base_guard = (preset_from_trial(base.id, store_path=db).results or {})["guard"]
    assert base_guard["verdict"] == "baseline" and base_guard["probes"] == 2
    assert "guard" not in (preset_from_trial(bare.id, store_path=db).results or {})


def test_report_shows_each_trials_guard_verdict(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        base = _add(store, BASE, arm="A")
        close = _add(store, CLOSE, arm="B", config=B_CONFIG)
        drifted = _add(store, DRIFTED, arm="B", repeat=1, config=B_CONFIG)
        data = collect(Study(store, "s"))
    labels = {r.trial.id: r.guard.label() for r in data.rows if r.guard is not None}
    assert labels == {base.id: "baseline", close.id: "close", drifted.id: "drifted"}
    assert data.ab_guard is not None and data.ab_guard.verdict is Verdict.DRIFTED
    written = write_report(tmp_path / "out", study="s", store_path=db)
    page = written.html.read_text()
    assert "Not recorded" not in page and "<h2>Output drift</h2>" in page
    assert "A/B outputs: drifted on 1/2 prompts from token 2" in page
    assert '<td class="l bad"' in page and '<td class="l warn"' in page
    md = written.markdown.read_text()
    assert "## Output drift" in md
    assert f"| {drifted.short_id} B2 | drifted | drifted on 1/2 prompts from token 2" in md
    assert f"| {close.short_id} B1 | close | close on 2/2 prompts" in md


def test_report_without_guard_records_says_so(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with TrialStore(db) as store:
        _add(store, None)
        assert store.list(study="s")[0].status is TrialStatus.DONE
    written = write_report(tmp_path / "out", study="s", store_path=db)
    assert "no trial of this study ran the output-drift guard" in written.html.read_text()
    assert "## Output drift" not in written.markdown.read_text()


def test_the_lab_answers_the_faces_ask(tmp_path: Path) -> None:
    """Study.guards / compare().outputs / winner_candidates: the same answers, via tuner.lab."""
    with TrialStore(tmp_path / "t.db") as store:
        base = _add(store, BASE)
        drifted = _add(store, DRIFTED, config=B_CONFIG, value=20.0)
        study = Study(store, "s")
        labels = {i: g.label() for i, g in study.guards().items()}
        assert labels == {base.id: "baseline", drifted.id: "drifted"}
        outputs = study.compare(base, drifted).outputs
        assert outputs is not None
        assert outputs.summary() == ab_guard([base], [drifted], base).summary()
        assert outputs.summary().startswith("outputs: drifted on 1/2 prompts from token 2")
        cands = study.winner_candidates("close")
        assert [t.id for t in cands.kept] == [base.id]
        assert [t.id for t, _ in cands.dropped] == [drifted.id]
