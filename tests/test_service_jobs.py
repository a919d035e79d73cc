"""The study service (issue 18): jobs outlive the terminal and the service itself.

The job table is tested with real processes; the end-to-end tests run the
real ``tunelab`` CLI in a pseudo-terminal, hang the terminal up while an A/B
runs as a job on the study engine double, SIGKILL the service, and check
that a new ``tunelab jobs`` finds the A/B finished with its verdict, nothing
orphaned and every trial in the store.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import fault_procs
from tuner.service.jobs import JobState, JobTable

REPO = Path(__file__).resolve().parents[1]


_wait = fault_procs.wait_until  # one poller for the service tests (tests/support/fault_procs)


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _submit(table: JobTable, argv: list[str]):  # type: ignore[no-untyped-def]
    return table.submit(argv, " ".join(argv), str(REPO), dict(os.environ))


def test_jobs_run_queue_and_end_with_their_status(tmp_path: Path) -> None:
    table = JobTable(tmp_path)
    ok = _submit(table, _py("print('hello from the job')"))
    bad = _submit(table, _py("import sys; sys.exit(3)"))
    assert ok.state is JobState.RUNNING and bad.state is JobState.QUEUED  # one at a time
    _wait(lambda: bad.state.ended, 30, "both jobs", table.pump)
    assert ok.state is JobState.FINISHED and ok.returncode == 0
    assert bad.state is JobState.FAILED and bad.returncode == 3
    assert bad.started is not None and ok.ended is not None and bad.started >= ok.ended - 0.6
    assert "hello from the job" in table.log_path(ok).read_text()
    assert (tmp_path / "jobs.json").stat().st_mode & 0o777 == 0o600


def test_stop_ends_a_running_job_like_ctrl_c_and_drops_a_queued_one(tmp_path: Path) -> None:
    table = JobTable(tmp_path)
    code = "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('got ctrl-c')\n    raise SystemExit(130)"
    running = _submit(table, _py(code))
    queued = _submit(table, _py("print('never')"))
    time.sleep(1.0)  # the child installs its Ctrl-C handler
    table.stop(queued)
    assert queued.state is JobState.STOPPED
    table.stop(running)
    _wait(lambda: running.state.ended, 20, "the stopped job", table.pump)
    assert running.state is JobState.STOPPED and running.returncode == 130
    assert "got ctrl-c" in table.log_path(running).read_text()
    assert queued.started is None


def test_a_restarted_table_adopts_a_running_job_and_learns_how_it_ended(tmp_path: Path) -> None:
    first = JobTable(tmp_path)
    job = _submit(first, _py("import time; time.sleep(2); raise SystemExit(4)"))
    second = JobTable(tmp_path)  # what a restarted service reads
    adopted = second.jobs[job.id]
    assert adopted.state is JobState.RUNNING
    _wait(lambda: adopted.state.ended, 30, "the adopted job", second.pump)
    assert adopted.state is JobState.FAILED and adopted.returncode == 4
    first.pump()  # reap our own child


def test_an_unreadable_table_is_kept_aside_not_lost(tmp_path: Path) -> None:
    (tmp_path / "jobs.json").write_text("{not json")
    table = JobTable(tmp_path)
    assert table.jobs == {}
    assert [p.name for p in tmp_path.glob("jobs.broken-*")]


# -- end to end: the real CLI, a pty hang-up and a SIGKILLed service ------------------------
FAST = ["--model", "engine-double", "--input-len", "16", "--output-len", "16"]
FAST += ["--num-prompts", "16", "--concurrency", "8", "--warmup", "0"]


def _tunelab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def job_env(tunelab_home: Path):  # type: ignore[no-untyped-def]
    env = dict(os.environ, TUNELAB_JOB_ENTRY="tests.support.study_cli", COLUMNS="200")
    env["TUNELAB_SERVICE_IDLE"] = "30"
    yield env
    pid = fault_procs.service_pid(tunelab_home)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)


def test_an_ab_job_survives_the_terminal_hang_up_and_a_killed_service(
    job_env: dict[str, str], tunelab_home: Path
) -> None:
    args = ["ab", "--a-set", "max-num-seqs=1", "--b-set", "max-num-seqs=8", "--repeats", "3"]
    args += [*FAST, "--study", "detached"]
    # `tunelab jobs start --follow` in a pseudo-terminal, as over SSH; then the line drops.
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(REPO)
        os.execve(
            sys.executable,
            [sys.executable, "-m", "tui", "jobs", "start", "-f", "--", *args],
            job_env,
        )
    seen = b""
    end = time.monotonic() + 60
    while b"launch" not in seen.lower() and b"trial" not in seen.lower():
        assert time.monotonic() < end, seen.decode(errors="replace")
        try:
            seen += os.read(fd, 4096)
        except OSError:
            break
    os.close(fd)  # hang-up: the follower gets SIGHUP and dies with its terminal
    _wait(lambda: os.waitpid(pid, os.WNOHANG)[0] != 0, 20, "the follower to end")
    job_id = seen.decode(errors="replace").split("job ", 1)[1].split()[0]

    service = fault_procs.service_pid(tunelab_home)
    assert service is not None
    os.kill(service, signal.SIGKILL)  # the service dies mid-study; the job must not

    def listed() -> str:
        out = _tunelab("jobs", env=job_env)
        assert out.returncode == 0, out.stderr
        return out.stdout

    _wait(lambda: f"{job_id}  finished" in listed(), 240, "the A/B job to finish")
    assert fault_procs.service_pid(tunelab_home) not in (None, service)  # restarted on demand
    log = _tunelab("jobs", "log", job_id, env=job_env).stdout
    assert "B better" in log, log[-2000:]
    results = _tunelab("results", "--study", "detached", "--json", env=job_env)
    trials = json.loads(results.stdout)
    assert len(trials) == 6 and all(t["status"] == "done" for t in trials), trials
    keep = {os.getpid(), fault_procs.service_pid(tunelab_home) or -1}
    assert fault_procs.processes_of(tunelab_home, keep) == []
