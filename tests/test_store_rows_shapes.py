"""Every JSON column of a trial row, every wrong type, deep nesting, huge numbers (issue 26).

A row that is not what tunelab wrote is one unreadable row, named by id and
field, while every read command (results, show, report, winner, ab --report,
export, the TUI's Results) goes on with the others; numbers a producer can
write stay readable. Rows are corrupted with plain SQLite; the helpers for
the store and the CLI are test_store_hostile_rows's (issue 19's cases).
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import typer

from tests.test_store_hostile_rows import _invoke, store_cli
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore


@pytest.fixture(name="app")
def _app() -> typer.Typer:
    return store_cli()


# -- issue 26: every JSON column, every type, deep nesting, huge numbers ---------------------
DEEP_LIST = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
# Stored text of a column that is not the JSON its field needs, and words of the reason.
NOT_THE_FIELD = {
    "list": ("[1, 2]", "not"),
    "text": ('"abc"', "not"),
    "number": ("5", "not"),
    "nan": ("NaN", "not"),
    "infinity": ("-Infinity", "not"),
    "huge-int": ("9" * 4000, "not"),
    "too-many-digits": ("9" * 5000, "digits"),
    "huge-float": ("1e999", "not"),
    "deep-list": (DEEP_LIST, "more than 64 levels deep"),
    "deep-object": (DEEP_OBJECT, "more than 64 levels deep"),
    "not-json": ("{", "bad JSON"),
    "blob": (b'{"a": "\xff"}', "can't decode"),
}


def _full_trial(study: str = "s", arm: str | None = None, repeat: int | None = None) -> Trial:
    """A finished trial with every JSON column filled by its real producer's ``to_dict``."""
    from tuner.bench.client import RequestRecord
    from tuner.bench.host_noise import HostNoise
    from tuner.bench.metrics import compute_metrics
    from tuner.bench.runner import BenchResult
    from tuner.bench.server_metrics import ServerSummary
    from tuner.engine.effective import EffectiveConfig, EffectiveValue, Mismatch
    from tuner.environment import Fingerprint
    from tuner.guard import GuardRun, ProbeResult, Thresholds
    from tuner.rules.types import Finding, Severity
    from tuner.telemetry.sampler import GpuWindow, WindowSummary

    wl = Workload(input_len=8, output_len=8, num_prompts=4, concurrency=2)
    engine = {"max-num-seqs": 16 if arm == "B" else 8}
    t = Trial(
        EngineConfig(model="org/m", engine=engine, env={"VLLM_ROCM_USE_AITER": "1"}),
        wl,
        study=study,
    )
    t.arm, t.repeat = arm, repeat
    recs = [
        RequestRecord(8, 8, s, s, [s + 0.01 * k for k in range(1, 9)], 8, s + 0.09)
        for s in (1.0, 2.0, 3.0, 4.0)
    ]
    recs.append(RequestRecord(8, 8, 5.0, 5.0, [], 0, 6.0, "timeout", "read timeout"))
    server = ServerSummary(True, 5, 4, 0.5, 1.0, 4.0, 0.0, 0.3, False, False, ["a note"])
    noise = HostNoise(1.0, 2, 0.3, 0.01, (("python", 0.2),), True, True, 0.5)
    metrics = compute_metrics(recs, 1.2, {"ttft": 50.0})
    results = BenchResult(
        "http://127.0.0.1:1",
        "org/m",
        wl,
        metrics,
        server,
        recs,
        "2024-01-01T00:00:00+00:00",
        "tok",
        noise,
    ).to_dict()
    gpu = GpuWindow(
        index=0,
        samples=2,
        mean_gfx_activity=50.0,
        peak_gfx_activity=90.0,
        mean_umc_activity=20.0,
        peak_vram_bytes=8 * 1024**3,
        mean_power_w=300.0,
        peak_power_w=350.0,
        energy_j=360.0,
        covered_s=1.2,
        series=((0.0, 300.0, 50.0, 1024), (1.0, None, 60.0, 2048)),
        dirt={"foreign process": 1},
        clean_samples=1,
    )
    telemetry = {**WindowSummary(0.0, 1.2, (gpu,)).to_dict(), "tokens_per_joule": 0.2}
    t.findings = [
        Finding(Severity.WARNING, ("max-num-seqs",), "m", "src", {"max-num-seqs": 4}, "r1")
    ]
    t.gpu_names, t.backend_actual, t.platform, t.vllm_version = (
        ["GPU 0"],
        "CPU_ATTN",
        "cpu",
        "0.32.0",
    )
    t.tags = {
        "kind": "ab",
        "order": "ABAB",
        "repeats": 2,
        "wave": repeat or 0,
        "slo": ["p99_ttft_ms<=500"],
    }
    t.timings = {"rules_s": 0.1, "start_s": 2.0, "bench_s": 1.2, "guard_s": 0.5, "total_s": 4.0}
    t.effective = EffectiveConfig(
        {"max-num-seqs": EffectiveValue("max-num-seqs", "8", "ev")},
        "args",
        "0.32",
        (Mismatch("dtype", "half", "bfloat16", "ev"),),
    ).to_dict()
    probe = ProbeResult("a", [1, 2], [5, 6, 7], [-0.1, -0.2, -0.3], [5, 6, 7], [-0.1, -0.2, -0.3])
    t.guard = GuardRun("org/m", 3, [probe], 0.5, None, None, Thresholds()).to_dict()
    t.environment = Fingerprint(vllm_version="0.32", gpu_count=1, power_cap_w=300.0).to_dict()
    t.untuned = {  # issue 29: tuner.engine.aiter_shapes.UntunedShapes.to_dict
        "shapes": [
            {"family": "bf16", "values": {"M": "8"}, "table": "t.csv", "lines": 2, "ranks": 2}
        ],
        "lines": 2,
    }
    t.startup_seconds, t.started_at = 12.5, t.created_at + 1
    t.results, t.server, t.telemetry = results, results["tunelab"]["server"], telemetry
    return t


def _store_with(db: Path, n: int) -> list[Trial]:
    """``n`` finished trials of study "s" (arms A, B, A, B ...) and a remembered A/B."""
    from tuner.lab.study import Study
    from tuner.studies.ab import build_report

    made = []
    with TrialStore(db) as store:
        for i in range(n):
            t = _full_trial(arm="AB"[i % 2], repeat=i // 2)
            store.add(t)
            made.append(
                store.save_result(t, t.results or {}, server=t.server, telemetry=t.telemetry)
            )
        Study(store, "s").remember_ab(build_report(made, study="s", objective="output_throughput"))
    return made


def _column(db: Path, trial_id: str, column: str) -> object:
    conn = sqlite3.connect(db)
    value = conn.execute(f"SELECT {column} FROM trials WHERE id = ?", (trial_id,)).fetchone()[0]
    conn.close()
    return value


def _set(db: Path, trial_id: str, column: str, value: object) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(f"UPDATE trials SET {column} = ? WHERE id = ?", (value, trial_id))
    conn.close()


def test_real_producer_output_is_readable(tmp_path: Path) -> None:
    """The shapes the store checks accept what tunelab's own producers write."""
    db = tmp_path / "t.db"
    made = _store_with(db, 2)
    with TrialStore(db) as store:
        scan = store.scan()
        assert scan.bad == [] and [t.id for t in scan.trials] == [t.id for t in made]
        assert scan.trials[0].to_dict() == made[0].to_dict()


def test_every_json_column_of_every_wrong_type_is_one_unreadable_row(
    app: typer.Typer, tmp_path: Path
) -> None:
    from tuner.trials.store import JSON_FIELDS

    db = tmp_path / "t.db"
    # null is "not recorded" for results, telemetry ...; a trial without config is unreadable.
    kinds = {**NOT_THE_FIELD, "null": (None, "not")}
    cases = [(col, kind) for col in JSON_FIELDS for kind in NOT_THE_FIELD]
    cases += [("config", "null"), ("workload", "null")]
    made = _store_with(db, 2 + len(cases))
    good, bad = made[:2], made[2:]
    for (column, kind), trial in zip(cases, bad, strict=True):
        _set(db, trial.id, column, kinds[kind][0])
    with TrialStore(db) as store:
        scan = store.scan()
        assert [t.id for t in scan.trials] == [t.id for t in good]
        reasons = {b.id: b.reason for b in scan.bad}
        assert set(reasons) == {t.id for t in bad}
        for (column, kind), trial in zip(cases, bad, strict=True):
            words = kinds[kind][1]
            assert words in reasons[trial.id], (column, kind, reasons[trial.id])
            if words == "not":
                assert reasons[trial.id].startswith(column), (column, kind, reasons[trial.id])
    code, out, err = _invoke(app, "results", "--store", str(db))
    assert code == 0 and good[0].short_id in out and good[1].short_id in out
    assert f"{len(bad)} unreadable row(s)" in err and all(t.id in err for t in bad)


# (column, path inside its JSON, stored value, words the unreadable row's reason holds)
INSIDE: list[tuple[str, tuple[object, ...], object, str]] = [
    ("results", ("output_throughput",), "abc", "results.output_throughput is 'abc', not a number"),
    ("results", ("completed",), 10**30, "results.completed is an integer over 64 bits"),
    ("results", ("p99_ttft_ms",), {"a": 1}, "results.p99_ttft_ms is a JSON object, not a number"),
    (
        "results",
        ("tunelab", "host_noise", "cores"),
        math.inf,
        "host_noise.cores is inf, not a whole",
    ),
    ("results", ("tunelab", "host_noise", "window_s"), None, "host_noise.window_s is None"),
    (
        "results",
        ("tunelab", "server", "notes"),
        "x",
        "results.tunelab.server.notes is 'x', not a list",
    ),
    ("results", ("tunelab", "failures"), [1], "results.tunelab.failures is a JSON array"),
    ("results", ("request_rate",), [1], "results.request_rate is a JSON array, not a number or"),
    ("results", ("model_id",), 5, "results.model_id is 5, not text"),
    ("results", ("future_key",), 10**100, "results.future_key is an integer over 64 bits"),
    ("server", ("peak_kv_cache_usage",), "full", "server.peak_kv_cache_usage is 'full'"),
    ("server", ("available",), "yes", "server.available is 'yes', not true or false"),
    ("telemetry", ("peak_vram_bytes",), "8G", "telemetry.peak_vram_bytes is '8G', not a number"),
    ("telemetry", ("gpus", 0, "index"), None, "telemetry.gpus[0].index is None"),
    ("telemetry", ("gpus", 0, "series", 0, 0), "t", "telemetry.gpus[0].series[0][0] is 't'"),
    ("telemetry", ("gpus", 0, "series", 0, 1), 1e308, "series[0][1] is 1e+308, not a measured"),
    ("telemetry", ("dirt", "throttled"), 0.5, "telemetry.dirt.throttled is 0.5, not a whole"),
    ("results", ("tunelab", "host_noise", "top", 0), ["python"], "top[0] is a JSON array, not a"),
    ("timings", ("total_s",), [1], "timings.total_s is a JSON array, not a number"),
    ("tags", ("wave",), None, "tags.wave is None"),
    ("tags", ("slo", 0), 5, "tags.slo[0] is 5, not text"),
    ("tags", ("sequential",), {"alpha": 0.05}, "tags.sequential lacks 'max_repeats'"),
    ("effective", ("values", "max-num-seqs"), "8", "effective.values.max-num-seqs is '8'"),
    ("effective", ("mismatches", 0, "knob"), None, "effective.mismatches[0].knob is None"),
    ("environment", ("power_cap_w",), "300W", "environment.power_cap_w is '300W'"),
    ("environment", ("gpu_count",), 1.5, "environment.gpu_count is 1.5"),
    ("untuned", ("shapes", 0, "lines"), 0, "untuned.shapes[0].lines is 0"),
    ("untuned", ("shapes", 0, "values", "M"), 8, "untuned.shapes[0].values.M is 8, not text"),
    ("config", ("env", "VLLM_ROCM_USE_AITER"), 1, "config.env.VLLM_ROCM_USE_AITER is 1, not"),
    ("config", ("engine", "max-num-seqs"), 10**40, "config.engine.max-num-seqs is an integer over"),
    ("config", ("engine", "compilation-config"), "[" * 9999 + "]" * 9999, "nested more than 64"),
    ("gpu_names", (0,), 1, "gpu_names[0] is 1, not text"),
    ("findings", (0, "severity"), "fatal", "severity 'fatal'"),
    ("workload", ("input_len",), "abc", "input_len"),
    ("guard", ("probes", 0, "logprobs", 0), 10**30, "guard.probes[0].logprobs[0] is an integer"),
]
# (column, stored value, words of the reason): SQLite keeps what it is given where the
# column's type cannot take it (a number stored into a TEXT column becomes text).
SCALARS: list[tuple[str, object, str]] = [
    ("created_at", "yesterday", "created_at is 'yesterday', not a finite number"),
    ("created_at", None, "created_at is None"),
    ("study", b"\xffs", "study is binary data, not text"),
    ("engine_pid", -5, "engine_pid is -5"),
    ("owner_pid", 2**40, "owner_pid is 1099511627776"),
    ("repeat", "first", "repeat is 'first'"),
    ("startup_seconds", "fast", "startup_seconds is 'fast', not a number"),
    ("log_path", b"/x", "log_path is binary data, not text"),
    ("arm", b"A", "arm is binary data, not text"),
]


def _put(doc: Any, path: tuple[object, ...], value: object) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _hostile_store(db: Path) -> tuple[list[Trial], dict[str, str]]:
    """Four good trials (an A/B of 2+2) and one row per INSIDE/SCALARS case: id -> words."""
    made = _store_with(db, 4 + len(INSIDE) + len(SCALARS))
    good, rest = made[:4], iter(made[4:])
    words: dict[str, str] = {}
    for column, path, value, said in INSIDE:
        trial = next(rest)
        doc = json.loads(str(_column(db, trial.id, column)))
        _put(doc, path, value)
        _set(db, trial.id, column, json.dumps(doc))
        words[trial.id] = said
    for column, value, said in SCALARS:
        trial = next(rest)
        _set(db, trial.id, column, value)
        words[trial.id] = said
    return good, words


def test_a_wrong_type_inside_a_column_names_the_field(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    good, words = _hostile_store(db)
    with TrialStore(db) as store:
        scan = store.scan()
        assert [t.id for t in scan.trials] == [t.id for t in good]
        reasons = {b.id: b.reason for b in scan.bad}
        assert set(reasons) == set(words)
        for trial_id, said in words.items():
            assert said in reasons[trial_id], (said, reasons[trial_id])
        assert store.recover() == []  # a pid of -5 or 2**40 never reaches psutil


def test_every_read_command_lists_the_good_rows_and_names_the_bad(
    app: typer.Typer, tmp_path: Path
) -> None:
    from tuner.cli.app import register_all
    from tuner.trials.store import default_path

    app = register_all(typer.Typer())
    db = default_path()  # `export TRIAL` reads the default store
    good, words = _hostile_store(db)
    bad = list(words)
    store = ["--store", str(db)]
    code, out, err = _invoke(app, "results", *store)
    assert code == 0 and all(t.short_id in out for t in good)
    assert f"{len(bad)} unreadable row(s)" in err and all(i in err for i in bad)
    code, out, _ = _invoke(app, "results", "--json", *store)
    assert code == 0 and [r["id"] for r in json.loads(out)] == [t.id for t in good]
    code, out, _ = _invoke(app, "results", "--csv", *store)
    assert code == 0 and len(out.splitlines()) == 1 + len(good)
    for args in (
        ["show", good[0].id],
        ["show", good[1].id, "--json"],
        ["winner", "--study", "s"],
        ["winner", "--study", "s", "--json"],
        ["ab", "--report", "--study", "s"],
        ["ab", "--report", "--study", "s", "--json"],
        ["report", "--study", "s", "--out", str(tmp_path / "report")],
        ["winner"],  # the newest study: a time or study name that is not one is skipped
    ):
        code, out, err = _invoke(app, *args, *store)
        assert code == 0, (args, out, err)
    assert (tmp_path / "report" / "report.html").is_file()
    with TrialStore(db) as opened:  # what `report` without --study picks from
        assert [s.name for s in opened.studies()] == ["s"]
    code, out, err = _invoke(app, "export", good[0].id, "--out", str(tmp_path / "ex"))
    assert code == 0, (out, err)
    for trial_id in bad[:2] + bad[-2:]:  # the one asked for is the bad one: a clear message
        code, out, err = _invoke(app, "show", trial_id, *store)
        assert code == 2 and f"trial {trial_id}" in err and "cannot be read" in err
        assert words[trial_id] in err and "Traceback" not in out + err
        code, out, err = _invoke(app, "export", trial_id, "--out", str(tmp_path / "ex2"))
        assert code == 2 and trial_id in err and words[trial_id] in err, (out, err)
    assert not (tmp_path / "ex2").exists()


def test_numbers_a_producer_can_write_stay_readable(app: typer.Typer, tmp_path: Path) -> None:
    """NaN, infinities, nulls and negatives in results are values, not corruption."""
    db = tmp_path / "t.db"
    made = _store_with(db, 2)
    doc = json.loads(str(_column(db, made[1].id, "results")))
    doc.update(output_throughput=math.nan, p99_ttft_ms=math.inf, request_goodput=None, failed=-1)
    doc["tunelab"]["server"]["peak_kv_cache_usage"] = None
    _set(db, made[1].id, "results", json.dumps(doc))
    _set(db, made[1].id, "telemetry", None)
    with TrialStore(db) as store:
        scan = store.scan()
        assert scan.bad == [] and scan.trials[1].objective_value is None
    for args in (["results"], ["show", made[1].id], ["winner", "--study", "s"]):
        code, out, err = _invoke(app, *args, "--store", str(db))
        assert code == 0, (args, out, err)


@pytest.mark.parametrize(
    "raw",
    ["[[[[" * 30_000, '{"A": "abc"}', '["x"]', '{"A": [1, 2]}', "{", "null"],
    ids=["deep", "arm-not-a-list", "not-an-object", "ids-not-text", "not-json", "null"],
)
def test_a_hostile_remembered_ab_is_no_ab(app: typer.Typer, tmp_path: Path, raw: str) -> None:
    from tuner.lab.study import LAST_AB_KEY, Study

    db = tmp_path / "t.db"
    _store_with(db, 2)
    with TrialStore(db) as store:
        store.set_study_setting("s", LAST_AB_KEY, raw)
        assert Study(store, "s").last_ab() is None
    code, _, err = _invoke(app, "ab", "--report", "--study", "s", "--store", str(db))
    assert code == 2 and "has no A/B" in err


async def test_the_tui_results_screen_lists_the_good_rows(tmp_path: Path) -> None:
    from textual.app import App
    from textual.widgets import DataTable

    from tui.screens.compare import CompareScreen
    from tui.screens.results import ResultsScreen
    from tuner.lab.study import Study

    db = tmp_path / "t.db"
    good, words = _hostile_store(db)
    _set(db, next(iter(words)), "results", "[1, 2]")
    _set(db, list(words)[1], "telemetry", DEEP_LIST)
    store = TrialStore(db)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ResultsScreen(Study(store, "s")))

    app = Host()
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, ResultsScreen)
            table = app.screen.query_one(DataTable)
            assert table.row_count == len(good)
            assert {table.coordinate_to_cell_key((r, 0)).row_key.value for r in range(4)} == {
                t.id for t in good
            }
            table.move_cursor(row=1)
            await pilot.press("c")  # compare the selected row with the baseline
            await pilot.pause()
            assert isinstance(app.screen, CompareScreen)
    finally:
        store.close()


def _tag_all(db: Path, trials: list[Trial], tag: str, value: object) -> None:
    for t in trials:
        doc = json.loads(str(_column(db, t.id, "tags")))
        doc[tag] = value
        _set(db, t.id, "tags", json.dumps(doc))


@pytest.mark.parametrize(
    "design",
    [
        {"max_repeats": 3, "alpha": 0.05, "spending": "bogus"},
        {"max_repeats": 3, "alpha": 5.0, "spending": "obf"},
    ],
    ids=["unknown-spending", "alpha-out-of-range"],
)
def test_an_unusable_stored_sequential_design_is_a_note(
    app: typer.Typer, tmp_path: Path, design: dict[str, object]
) -> None:
    db = tmp_path / "t.db"
    _tag_all(db, _store_with(db, 4), "sequential", design)
    code, out, err = _invoke(app, "ab", "--report", "--study", "s", "--json", "--store", str(db))
    assert code == 0, err
    assert any("judged as a fixed A/B" in n for n in json.loads(out)["notes"])


def test_an_unreadable_stored_slo_is_a_clear_winner_message(
    app: typer.Typer, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    _tag_all(db, _store_with(db, 2), "slo", ["p99_ttft_ms<=abc"])
    code, out, err = _invoke(app, "winner", "--study", "s", "--store", str(db))
    assert code != 0 and "records an SLO that cannot be read" in err and "--slo" in err
    assert "Traceback" not in out + err
    code, _, err = _invoke(
        app, "winner", "--study", "s", "--slo", "p99_ttft_ms<=500", "--store", str(db)
    )
    assert code == 0, err


@pytest.mark.parametrize("objective", ["bogus", ""])
def test_a_stored_objective_tunelab_cannot_rank_is_a_clear_winner_message(
    app: typer.Typer, tmp_path: Path, objective: str
) -> None:
    db = tmp_path / "t.db"
    made = _store_with(db, 2)
    _set(db, made[0].id, "objective", objective)
    code, out, err = _invoke(app, "winner", "--study", "s", "--store", str(db))
    assert code != 0 and "cannot tell whether higher or lower is better" in err
    assert "Traceback" not in out + err
    args = ("winner", "--study", "s", "--objective", "output_throughput", "--store", str(db))
    code, _, err = _invoke(app, *args)
    assert code == 0, err


def test_absurd_magnitudes_rank_nowhere(tmp_path: Path) -> None:
    """A stored 1e308 or 5e-324 is no measurement: no statistic over it may overflow."""
    from tuner.cli.app import register_all

    app = register_all(typer.Typer())
    db = tmp_path / "t.db"
    made = _store_with(db, 4)
    for trial, value in zip(made[1:], (1e308, -1e308, 5e-324), strict=True):
        doc = json.loads(str(_column(db, trial.id, "results")))
        doc.update(output_throughput=value, p99_ttft_ms=value)
        _set(db, trial.id, "results", json.dumps(doc))
    with TrialStore(db) as store:
        scan = store.scan()
        assert scan.bad == [] and [t.objective_value for t in scan.trials[1:]] == [None] * 3
    for args in (
        ["winner", "--study", "s"],
        ["ab", "--report", "--study", "s"],
        ["report", "--study", "s", "--out", str(tmp_path / "r")],
    ):
        code, out, err = _invoke(app, *args, "--store", str(db))
        assert code == 0 and "Traceback" not in out + err, (args, out, err)
    code, out, err = _invoke(app, "winner", "--study", "s", "--json", "--store", str(db))
    assert code == 0 and json.loads(out)["winner"]["trial"] == made[0].id, err
