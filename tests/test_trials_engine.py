"""Trials on the real vLLM CPU engine: end to end, a crash mid-benchmark, and a killed tunelab.

Each test starts its own engine (30-60 s on 2 cores) and checks everything that
engine start can show, so no other test starts one for the same question: the
end-to-end trial also holds the engine to loopback, its IPC sockets to their
directory and the user's secrets out of every file; the crash and the kill also
check that no process and no socket directory is left. Run them under
``flock /tmp/tunelab-engine.lock`` so only one engine starts at a time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from tests.support import fault_procs
from tests.support.procs import alive
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.engine import proctree
from tuner.engine.ipc_dir import IPC_ENV
from tuner.rules.types import Severity
from tuner.trials.events import TrialBackend, TrialDone, TrialFailed, TrialProgress, TrialStage
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.runner import run_trial
from tuner.trials.store import TrialStore

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[1]
CANARY = "hf_CANARY_7c1e_must_never_be_written"
SECRETS = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
)


def _tmp_sockets() -> set[str]:
    """Socket files at the top of the temp dir (where vLLM puts its own by default)."""
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.is_socket()}


def listening(pid: int) -> list[tuple[int, str, int]]:
    """(pid, ip, port) of every listening inet socket of ``pid`` and its descendants."""
    out = []
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    out.append((proc.pid, conn.laddr.ip, conn.laddr.port))
        except psutil.Error:
            continue
    return out


def files_containing(root: Path, needle: bytes) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    hits.append(str(path))
            except OSError:
                continue
    return hits


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)


def demo(model: Path) -> EngineConfig:
    return EngineConfig(model=str(model), engine=dict(DEMO_ENGINE_ARGS))


async def test_one_trial_end_to_end_on_the_cpu_engine(
    demo_model_path: Path,
    tunelab_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One real trial, then its export: stored right, loopback only, no secret written, nothing left.

    The user's shell secrets (``HF_TOKEN`` and friends) hold a canary value; after
    the trial and a full export every file under TUNELAB_HOME and the export
    directory is searched for it. While the engine measures, its whole tree's
    listening sockets must be on 127.0.0.1 and vLLM's IPC sockets in the
    directory tunelab gave it, which is gone (with no socket left in the temp
    dir) once the trial ends.
    """
    from typer.testing import CliRunner

    from tuner.cli.app import register_all

    marker = fault_procs.new_marker()
    monkeypatch.setenv(fault_procs.MARKER, marker)
    for name in SECRETS:
        monkeypatch.setenv(name, CANARY)
    store = TrialStore()  # the default store, under TUNELAB_HOME
    events: list[object] = []
    pids: set[int] = set()
    seen: dict[str, object] = {}
    sockets_before = _tmp_sockets()

    def on_event(event: object) -> None:
        events.append(event)
        if isinstance(event, TrialStage) and event.stage == "measuring":
            root = store.get(trial.id).engine_pid
            assert root is not None
            pids.update(r.pid for r in proctree.tree(root, root))
            seen["ipc"] = Path(psutil.Process(root).environ()[IPC_ENV])
            seen["listening"] = listening(root)

    trial = Trial(
        demo(demo_model_path),
        Workload(input_len=64, output_len=32, num_prompts=16, concurrency=4, warmup_requests=2),
        study="e2e",
    )
    out = await run_trial(trial, store, on_event=on_event)
    assert out.status is TrialStatus.DONE, out.failure_reason
    stored = store.get(out.id)
    assert (
        stored.results is not None
        and stored.results["completed"] == 16
        and stored.results["failed"] == 0
    )
    assert stored.results["total_output_tokens"] == 16 * 32  # every streamed token arrived
    assert stored.objective_value and stored.objective_value > 0
    assert stored.backend_actual == "CPU_ATTN" and stored.backend_requested is None
    assert stored.vllm_version == "0.32.0" and stored.platform == "cpu"
    assert stored.startup_seconds and stored.startup_seconds > 1
    assert stored.server is not None
    assert stored.findings == out.findings and not any(
        f.severity is Severity.ERROR for f in stored.findings
    )
    log = Path(stored.log_path or "")
    assert log.is_file() and log.parent.parent == tunelab_home / "data" / "trials"
    assert "api_server" in log.read_text()
    assert any(isinstance(e, TrialBackend) and e.actual == "CPU_ATTN" for e in events)
    assert sum(isinstance(e, TrialDone) for e in events) == 1
    assert any(isinstance(e, TrialProgress) for e in events)
    assert len(pids) >= 3, f"expected API server + engine core + worker, saw {pids}"
    assert not wait_gone(pids, 5), f"engine processes left behind: {alive(pids)}"
    # Loopback only, and vLLM's sockets in tunelab's directory, removed with the engine.
    assert seen.get("listening"), "no listening socket seen while the engine ran"
    assert {ip for _, ip, _ in seen["listening"]} == {"127.0.0.1"}, seen["listening"]  # type: ignore[attr-defined]
    ipc = seen["ipc"]
    assert isinstance(ipc, Path) and not ipc.exists(), (
        f"the engine's socket directory was left: {ipc}"
    )
    assert not _tmp_sockets() - sockets_before, "the engine left socket files in the temp dir"
    overhead = (
        out.timings["total_s"]
        - out.startup_seconds
        - out.timings["bench_s"]
        - out.timings["stop_s"]
    )
    assert overhead < 30, out.timings  # sanity only; benchmarks/trial_overhead.py measures it
    store.close()

    # The export and the read-only faces print no secret either.
    export_dir = tmp_path / "export"
    app = register_all(__import__("typer").Typer())
    for argv in (
        ["export", trial.id, "--out", str(export_dir)],
        ["show", trial.id, "--json"],
        ["results", "--csv"],
    ):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
        assert CANARY not in result.output, argv
    assert sorted(p.suffix for p in export_dir.iterdir()) == [".sh", ".sh", ".toml", ".yaml"]
    leaks = files_containing(tunelab_home, CANARY.encode())
    leaks += files_containing(export_dir, CANARY.encode())
    assert not leaks, f"the canary secret was written to {leaks}"
    left = fault_procs.wait_untagged(marker, 10.0)
    fault_procs.kill_all(left)
    assert not left, fault_procs.describe(left)


async def test_engine_crash_mid_benchmark_fails_the_trial_fast(
    demo_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL of the real VLLM::EngineCore mid-run: failed within 1 s, named, nothing left."""
    marker = fault_procs.new_marker()
    monkeypatch.setenv(fault_procs.MARKER, marker)
    store = TrialStore()
    marks: dict[str, float] = {}
    tree: set[int] = set()

    def on_event(event: object) -> None:
        if isinstance(event, TrialProgress) and "kill" not in marks and event.progress.done >= 1:
            root = store.get(trial.id).engine_pid
            assert root is not None
            tree.update(r.pid for r in proctree.tree(root, root))
            core = [p for p in tree if psutil.Process(p).name() == "VLLM::EngineCore"]
            assert core, f"no VLLM::EngineCore in {tree}"
            os.kill(core[0], signal.SIGKILL)
            marks["kill"] = time.monotonic()
        elif isinstance(event, TrialFailed):
            marks["failed"] = time.monotonic()

    # ~16k output tokens: several seconds of measured run, so the kill lands mid-run.
    trial = Trial(
        demo(demo_model_path), Workload(input_len=32, output_len=256, num_prompts=64, concurrency=4)
    )
    out = await run_trial(trial, store, on_event=on_event)
    assert "kill" in marks, "the benchmark never reported progress"
    assert out.status is TrialStatus.FAILED
    delay = marks["failed"] - marks["kill"]
    assert delay < 1.0, f"crash noticed after {delay:.2f} s"
    assert "VLLM::EngineCore" in (out.failure_reason or "") and "measured run" in (
        out.failure_reason or ""
    )
    assert store.get(out.id).status is TrialStatus.FAILED
    assert not wait_gone(tree, 5), f"engine processes left behind: {alive(tree)}"
    # Nothing that carries this test's tag either (a child the tree walk missed).
    left = fault_procs.wait_untagged(marker, 10.0)
    fault_procs.kill_all(left)
    assert not left, f"engine processes survived: {fault_procs.describe(left)}"


def test_sigkill_of_tunelab_run_leaves_no_engine_and_recovers(
    demo_model_path: Path, tunelab_home: Path
) -> None:
    env = {**os.environ, "TUNELAB_HOME": str(tunelab_home)}
    tunelab = Path(sys.executable).with_name("tunelab")  # the console script itself
    cmd = [
        str(tunelab),
        "run",
        "--model",
        "tunelab:demo",
        "--num-prompts",
        "400",
        "--output-len",
        "256",
        "--concurrency",
        "2",
        "--study",
        "killed",
    ]
    runner = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    tree: set[int] = set()
    try:
        store = TrialStore(tunelab_home / "data" / "tunelab.db")
        deadline = time.monotonic() + 400
        trial = None
        while time.monotonic() < deadline and runner.poll() is None:
            trials = store.list("killed")
            if trials and trials[0].status is TrialStatus.MEASURING:
                trial = trials[0]
                break
            time.sleep(0.5)
        assert trial is not None, (
            f"tunelab run never reached measuring: {runner.stderr.read().decode()[-2000:]}"
        )  # type: ignore[union-attr]
        time.sleep(1.0)  # well inside the measured run
        root = trial.engine_pid
        assert root is not None
        tree = {r.pid for r in proctree.tree(root, root)}
        assert len(alive(tree)) >= 3
        ipc = Path(psutil.Process(root).environ()[IPC_ENV])
        assert ipc.is_dir()
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        assert not wait_gone(tree, 20), f"orphaned engine processes: {alive(tree)}"
        deadline = time.monotonic() + 10
        while ipc.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not ipc.exists(), f"the reaper left the engine's socket directory: {ipc}"
        reopened = TrialStore(tunelab_home / "data" / "tunelab.db")
        assert (
            reopened.get(trial.id).status is TrialStatus.MEASURING
        )  # as the killed process left it
        recovered = reopened.recover()
        assert [t.id for t in recovered] == [trial.id]
        back = reopened.get(trial.id)
        assert back.status is TrialStatus.INTERRUPTED and "measuring" in (back.failure_reason or "")
        # The CLI shows it too (and recovering again changes nothing).
        shown = subprocess.run(
            [str(tunelab), "results", "--study", "killed", "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert '"status": "interrupted"' in shown.stdout
    finally:
        if runner.poll() is None:
            runner.kill()
        for pid in alive(tree):
            os.kill(pid, signal.SIGKILL)
