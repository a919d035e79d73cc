"""A profile of each arm, taken after its measured run on the same launch (issue 29).

The A/B runs on the study engine double (tests/support/study_engine_double.py),
which arms ``/start_profile``/``/stop_profile`` only when launched with vLLM's
``--profiler-config`` and then writes a *recorded real* vLLM CPU worker trace
(tests/data/traces: max-num-seqs 1 for arm A, 32 for arm B). So what is tested
here is tunelab's side: which launches are armed, when the window is taken
(never inside the measured run), what is stored, and the A/B's explanation.
The real engine's capture is tests/test_studies_engine.py's profiled A/B.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.support.study_cli import double_command
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.profiles import capture
from tuner.profiles.capture import launch_options, window_workload
from tuner.profiles.record import ProfileRecord
from tuner.profiles.trace import TraceError, profile_of
from tuner.rules import Target
from tuner.studies.ab import build_report, run_ab
from tuner.studies.executor import TrialRunner
from tuner.trials.context import RunContext
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.shapes import ShapeError, check_trial
from tuner.trials.store import TrialStore

TRACES = Path(__file__).parent / "data" / "traces"
LOAD = Workload(input_len=8, output_len=8, num_prompts=12, concurrency=4, warmup_requests=2)


@pytest.fixture
def double_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "starts.jsonl"
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "5")
    monkeypatch.setenv("DOUBLE_START_LOG", str(log))
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))
    return log


def _runner(store: TrialStore) -> TrialRunner:
    context = RunContext(Target(platform="cpu", note="study engine double"), None, [])
    options = {"startup_timeout": 60, "context": context, "guard": False}
    return TrialRunner(store, None, options, double_command)


def _ab(store: TrialStore, *, profile: bool, repeats: int = 2) -> None:
    base = EngineConfig(model="engine-double")
    a, b = base.with_values({"max-num-seqs": 1}), base.with_values({"max-num-seqs": 32})
    asyncio.run(run_ab(a, b, LOAD, _runner(store), repeats=repeats, study="ab", profile=profile))


def _profiler_args(log: Path) -> list[list[str]]:
    starts = [json.loads(line) for line in log.read_text().splitlines()]
    return [[a for a in s["argv"] if a.startswith("--profiler-config")] for s in starts]


def test_a_profiled_ab_explains_b_from_each_arms_first_launch(
    double_env: Path, tmp_path: Path
) -> None:
    with TrialStore(tmp_path / "t.db") as store:
        _ab(store, profile=True)
        trials = store.list("ab")
        report = build_report(trials, study="ab", objective="output_throughput")
    # No extra launch: one per trial, every launch of the arms armed alike.
    assert len(trials) == 4 and all(t.status is TrialStatus.DONE for t in trials)
    armed = _profiler_args(double_env)
    assert len(armed) == 4 and all(len(a) == 1 for a in armed)
    # Each arm's first launch took the window; the other launches only armed the profiler.
    for t in trials:
        assert t.tags["profile"] == ("capture" if t.repeat == 0 else "armed")
        if t.repeat:
            assert t.profile is None
            continue
        record = ProfileRecord.from_dict(t.profile)
        assert record is not None and record.error is None and record.summary is not None
        # The window came after the measured run (never inside it), at the workload's load.
        assert record.started_at and record.measured_ended_at
        assert record.started_at >= record.measured_ended_at
        assert (record.requests, record.concurrency) == (4, 4)
        assert Path(record.trace or "").name.startswith("rank0.")
        assert t.timings["profile_s"] > 0
    # The stored A/B explains its measured difference with the arms' profiles.
    found = report.explanation
    assert found is not None and found.explanation is not None
    a0 = next(t for t in trials if t.arm == "A" and t.repeat == 0)
    b0 = next(t for t in trials if t.arm == "B" and t.repeat == 0)
    assert (found.a_trial, found.b_trial) == (a0.id, b0.id)
    expected = 1e3 / b0.results["output_throughput"] - 1e3 / a0.results["output_throughput"]
    assert found.explanation.measured
    assert found.explanation.total_ms == pytest.approx(expected)
    a_trace = profile_of(TRACES / "cpu-max-num-seqs-1.pt.trace.json.gz", "cpu")
    # Each profile scaled to its own launch's measured per-token time.
    scale = found.explanation.scale
    assert scale is not None
    assert scale[0] == pytest.approx(1e3 / a0.results["output_throughput"] / a_trace.ms_per_token)
    gaps = next(r for r in found.explanation.rows if r.family == "gaps")
    assert gaps.a_ms == pytest.approx(a_trace.per_token_ms("gaps") * scale[0])
    assert report.to_dict()["explanation"]["summary"] == found.summary()


def test_an_unprofiled_ab_arms_nothing_and_explains_nothing(
    double_env: Path, tmp_path: Path
) -> None:
    with TrialStore(tmp_path / "t.db") as store:
        _ab(store, profile=False, repeats=1)
        trials = store.list("ab")
        report = build_report(trials, study="ab", objective="output_throughput")
    assert _profiler_args(double_env) == [[], []]
    assert all(t.profile is None and "profile" not in t.tags for t in trials)
    assert report.explanation is None and report.to_dict()["explanation"] is None


def test_a_failed_window_is_a_record_and_the_trial_still_counts(
    double_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_trace(folder: Path, before: set[Path], wait_s: float) -> Path:
        raise TraceError(f"vLLM wrote no worker trace into {folder} within 0 s")

    monkeypatch.setattr(capture, "_new_trace", no_trace)
    with TrialStore(tmp_path / "t.db") as store:
        _ab(store, profile=True, repeats=1)
        trials = store.list("ab")
        report = build_report(trials, study="ab", objective="output_throughput")
    assert all(t.status is TrialStatus.DONE and t.results for t in trials)
    first = next(t for t in trials if t.arm == "A")
    assert "wrote no worker trace" in (first.profile or {}).get("error", "")
    assert report.explanation is not None and report.explanation.explanation is None
    assert report.explanation.summary().startswith("profile: no explanation (arm A's profile")


def test_an_engine_without_the_profiler_armed_is_named(double_env: Path, tmp_path: Path) -> None:
    """/start_profile on an engine started without --profiler-config (vLLM answers 404)."""

    async def run() -> ProfileRecord:
        from tuner.engine import Engine, EngineSpec

        spec = EngineSpec(
            config=EngineConfig(model="engine-double"),
            log_path=tmp_path / "engine.log",
            command=double_command(EngineConfig(model="engine-double")),
            startup_timeout=60,
        )
        engine = Engine(spec)
        await engine.start()
        try:
            assert engine.url is not None
            return await capture.capture(
                engine.url, "engine-double", LOAD, tmp_path / "p", "cpu", None
            )
        finally:
            await engine.stop()

    record = asyncio.run(run())
    assert record.summary is None
    assert record.error and "HTTP 404" in record.error and "profiler armed" in record.error


@pytest.mark.parametrize(
    ("version", "flag", "env"),
    [
        ("0.32.0", True, False),
        ("0.13.0", True, False),
        (None, True, False),
        ("0.12.0", False, True),
        ("0.6.1.post1", False, True),
    ],
)
def test_the_profiler_is_armed_the_way_each_vllm_release_takes(
    version: str | None, flag: bool, env: bool, tmp_path: Path
) -> None:
    args, variables = launch_options(tmp_path, version)
    assert bool(args) is flag and bool(variables) is env
    if flag:
        (arg,) = args
        config = json.loads(arg.removeprefix("--profiler-config="))
        assert config["profiler"] == "torch" and config["torch_profiler_dir"] == str(tmp_path)
        assert config["torch_profiler_with_stack"] is False  # stacks multiply the trace size
    else:
        assert variables["VLLM_TORCH_PROFILER_DIR"] == str(tmp_path)


def test_a_vllm_without_a_profiler_is_told_so(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no /start_profile"):
        launch_options(tmp_path, "0.5.4")


def test_the_window_is_one_wave_of_the_workload_without_warm_up() -> None:
    assert window_workload(LOAD) == Workload(
        input_len=8, output_len=8, num_prompts=4, concurrency=4, warmup_requests=0
    )
    unbounded = window_workload(Workload(num_prompts=500, warmup_requests=8))
    assert unbounded.num_prompts == capture.MAX_WINDOW_REQUESTS and unbounded.concurrency is None
    assert window_workload(Workload(num_prompts=3, concurrency=16)).num_prompts == 3


def test_a_stored_profile_round_trips_and_a_hostile_one_is_refused() -> None:
    summary = profile_of(TRACES / "cpu-max-num-seqs-32.pt.trace.json.gz", "cpu")
    record = ProfileRecord(
        trace="/t/rank0.1.pt.trace.json.gz",
        requests=4,
        concurrency=4,
        started_at=2.0,
        ended_at=3.0,
        measured_ended_at=1.0,
        summary=summary,
    )
    data = record.to_dict()
    check_trial({"profile": data})
    assert ProfileRecord.from_dict(json.loads(json.dumps(data))) == record
    assert "10 engine steps" in record.describe()
    for bad in (
        {**data, "summary": {**data["summary"], "window_s": "fast"}},
        {**data, "summary": {"platform": "cpu"}},
        {**data, "requests": -1},
        "a string",
    ):
        with pytest.raises(ShapeError):
            check_trial({"profile": bad})
    trial = Trial(EngineConfig(model="m"), Workload(), profile=data)
    assert Trial.from_dict(json.loads(json.dumps(trial.to_dict()))).profile == data
