"""The study service against other local users and hostile input (issue 26).

Another user must not be able to stand in for the service (a socket directory
they made, a symlink, a loose mode, a socket they serve), nor be let in by it;
the job table keeps no environment past a job's start and signals no process
it cannot prove is its own job's wrapper; a malformed or huge request gets a
4xx that says what is wrong; secrets of a command line and escape sequences
never reach a title, a log's first line or a listing. The tests that act as
another user (``nobody``) need root, as the test machines run.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from tests.support import fault_procs
from tuner.cli import jobs as cli_jobs
from tuner.service import jobs as service_jobs
from tuner.service import paths
from tuner.service.client import ServiceClient, ServiceError
from tuner.service.errors import ForeignPeerError, UnsafeServiceDirError
from tuner.service.jobs import JobState, JobTable
from tuner.service.server import Service
from tuner.service.view import job_line

REPO = Path(__file__).resolve().parents[1]
SECRETS = ("SECRETHDR", "SECRETKEY")
HOSTILE_ARGS = ["bench", "--header", "Authorization: Bearer SECRETHDR", "--api-key=SECRETKEY"]

as_root = pytest.mark.skipif(os.getuid() != 0, reason="acting as another user needs root")


def _nobody() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return 65534, 65534
    return entry.pw_uid, entry.pw_gid


_wait = fault_procs.wait_until  # one poller for the service tests (tests/support/fault_procs)


# -- the socket's directory ----------------------------------------------------------------
def test_a_fresh_runtime_dir_is_made_0700_whatever_the_umask() -> None:
    old = os.umask(0o777)  # mkdir alone would make it 0000
    try:
        folder = paths.runtime_dir()
    finally:
        os.umask(old)
    info = os.lstat(folder)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o700


@as_root
def test_another_users_runtime_dir_is_refused(tunelab_home: Path) -> None:
    run = tunelab_home / "run"
    run.mkdir(mode=0o700)
    os.chown(run, *_nobody())
    with pytest.raises(UnsafeServiceDirError) as err:
        paths.socket_path()
    assert "belongs to" in err.value.message and "not to you" in err.value.message
    assert err.value.fix and "TUNELAB_HOME" in err.value.fix
    with pytest.raises(ServiceError):  # what the TUI and the CLI catch
        ServiceClient()


def test_a_symlinked_runtime_dir_is_refused(tunelab_home: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tunelab_home / "run").symlink_to(target)
    with pytest.raises(UnsafeServiceDirError) as err:
        paths.lock_path()
    assert "symbolic link" in err.value.message and err.value.fix


def test_a_runtime_dir_open_to_others_is_refused_not_adopted(tunelab_home: Path) -> None:
    run = tunelab_home / "run"
    run.mkdir()
    run.chmod(0o755)
    with pytest.raises(UnsafeServiceDirError) as err:
        paths.socket_path()
    assert "mode 0755" in err.value.message and "chmod 700" in (err.value.fix or "")
    assert stat.S_IMODE(run.stat().st_mode) == 0o755  # refused, not silently changed


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path: under a long tmp_path (pytest-xdist's ``popen-gwN``)
    the socket path would pass the socket length limit and the service would rightly move
    to ``$TMPDIR``, out of the directory under test."""
    path = Path(tempfile.mkdtemp(prefix="tl-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("owner_is_other", [False, True], ids=["world-writable", "foreign"])
def test_a_runtime_dir_under_a_directory_others_control_is_refused(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch, owner_is_other: bool
) -> None:
    if owner_is_other and os.getuid() != 0:
        pytest.skip("acting as another user needs root")
    shared = short_tmp / "shared"
    shared.mkdir()
    if owner_is_other:
        os.chown(shared, *_nobody())
    else:
        shared.chmod(0o777)  # no sticky bit: anyone may rename what is in it
    home = shared / "home"
    home.mkdir()
    monkeypatch.setenv("TUNELAB_HOME", str(home))
    with pytest.raises(UnsafeServiceDirError) as err:
        paths.socket_path()
    assert str(shared) in err.value.message and err.value.fix
    with pytest.raises(UnsafeServiceDirError):
        paths.jobs_dir()  # the job table (a queued job's environment) too


@pytest.fixture
def long_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A TUNELAB_HOME too long for a socket path, and a temporary dir of the test's own."""
    home = tmp_path / ("h" * 120)
    home.mkdir()
    monkeypatch.setenv("TUNELAB_HOME", str(home))
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: anyone may create, only owners may rename
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    return shared


@as_root
def test_a_tmp_fallback_dir_another_user_made_first_is_refused(long_home: Path) -> None:
    mine = paths.runtime_dir()
    assert mine.parent == long_home and stat.S_IMODE(mine.stat().st_mode) == 0o700
    mine.rmdir()
    mine.mkdir(mode=0o700)  # the predictable name, taken first by another user
    os.chown(mine, *_nobody())
    with pytest.raises(UnsafeServiceDirError) as err:
        paths.socket_path()
    assert str(mine) in err.value.message and "belongs to" in err.value.message


def test_a_tmp_fallback_in_a_dir_without_the_sticky_bit_is_refused(long_home: Path) -> None:
    long_home.chmod(0o777)  # others could rename our directory away and put theirs there
    with pytest.raises(UnsafeServiceDirError) as err:
        paths.runtime_dir()
    assert "sticky" in err.value.message


# -- peer credentials ------------------------------------------------------------------------
def _foreign_listener(path: Path) -> tuple[int, int]:
    """A child that serves ``path`` as ``nobody``; returns (pid, fd to read what it got)."""
    ready_r, ready_w = os.pipe()
    got_r, got_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.setgid(_nobody()[1])
            os.setuid(_nobody()[0])
            listener.listen(1)  # the credentials a client sees are taken here
            os.write(ready_w, b"1")
            conn, _ = listener.accept()
            conn.settimeout(5)
            received = 0
            try:
                while chunk := conn.recv(65536):
                    received += len(chunk)
            except OSError:
                pass
            os.write(got_w, str(received).encode())
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(got_w)
    assert os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    return pid, got_r


def _end_child(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


@as_root
def test_the_client_sends_nothing_to_a_socket_another_user_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sock"
    pid, got = _foreign_listener(path)
    monkeypatch.setattr(paths, "socket_path", lambda: path)  # as if it sat in our directory
    try:
        with pytest.raises(ForeignPeerError) as err:
            ServiceClient().submit(["run"])  # the request that would carry the environment
        assert (
            f"uid {_nobody()[0]}" in err.value.message and "nothing was sent" in err.value.message
        )
        assert os.read(got, 64) == b"0"  # not a byte reached the foreign server
    finally:
        os.close(got)
        _end_child(pid)


@pytest.fixture
def live_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real service, in a TUNELAB_HOME that other users may traverse (0711)."""
    home = Path(tempfile.mkdtemp(prefix="tl-svc-", dir="/tmp"))
    home.chmod(0o711)
    monkeypatch.setenv("TUNELAB_HOME", str(home))
    monkeypatch.setenv("TUNELAB_SERVICE_IDLE", "30")
    try:
        with ServiceClient() as client:
            client.ensure()
        yield home
    finally:
        pid = fault_procs.service_pid(home)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            _wait(lambda: not psutil.pid_exists(pid) or _zombie(pid), 10, "the service to end")
        shutil.rmtree(home, ignore_errors=True)


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _service_log(home: Path) -> str:
    return (home / "data" / "jobs" / "service.log").read_text(errors="replace")


@as_root
def test_the_service_drops_a_connection_from_another_user(live_service: Path) -> None:
    run = live_service / "run"
    run.chmod(0o711)  # as if the modes had been loosened: only the peer check is left
    (run / "service.sock").chmod(0o666)
    answered_r, answered_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(_nobody()[1])
            os.setuid(_nobody()[0])
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.connect(str(run / "service.sock"))
            answer = b""
            try:
                sock.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = sock.recv(100)
            except OSError:
                pass
            os.write(answered_w, b"answered" if answer else b"dropped")
        finally:
            os._exit(0)
    os.close(answered_w)
    try:
        assert os.read(answered_r, 16) == b"dropped"
    finally:
        os.close(answered_r)
        _end_child(pid)
    _wait(lambda: "another user" in _service_log(live_service), 5, "the service's note")


# -- what the table keeps --------------------------------------------------------------------
def _py(code: str, *extra: str) -> list[str]:
    return [sys.executable, "-c", code, *extra]


def test_the_table_drops_a_jobs_environment_once_it_starts(tmp_path: Path) -> None:
    table = JobTable(tmp_path)
    env = dict(os.environ, HF_TOKEN="hf_SECRETENV")
    first = table.submit(
        _py("import time; time.sleep(0.5)", "--api-key=SECRETARG"), "a", str(REPO), env
    )
    queued = table.submit(_py("pass"), "b", str(REPO), env)
    assert first.state is JobState.RUNNING and queued.state is JobState.QUEUED
    text = (tmp_path / "jobs.json").read_text()
    assert text.count("hf_SECRETENV") == 1  # the queued job's: needed to start it
    assert "SECRETARG" not in text
    _wait(lambda: queued.state.ended, 30, "both jobs", table.pump)
    assert "hf_SECRETENV" not in (tmp_path / "jobs.json").read_text()
    assert first.env == {} and queued.env == {}
    assert stat.S_IMODE((tmp_path / "jobs.json").stat().st_mode) == 0o600


def _row(**fields: Any) -> dict[str, Any]:
    row = {"id": "0badc0de", "argv": ["x"], "title": "t", "cwd": "/", "env": {}}
    row |= {"state": "running", "submitted": 1.0, "started": 1.0}
    return row | fields


def test_a_loaded_table_loses_the_environments_of_jobs_that_started(tmp_path: Path) -> None:
    rows = [_row(id="0001", state="finished", env={"HF_TOKEN": "hf_OLDSECRET"}, pid=None)]
    (tmp_path / "jobs.json").write_text(json.dumps(rows))
    JobTable(tmp_path)
    assert "hf_OLDSECRET" not in (tmp_path / "jobs.json").read_text()
    assert stat.S_IMODE((tmp_path / "jobs.json").stat().st_mode) == 0o600


class _RecordingOs:
    """``os`` for the job table, with its signals recorded instead of sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def kill(self, pid: int, sig: int) -> None:
        self.sent.append(("kill", pid, sig))

    def killpg(self, pgid: int, sig: int) -> None:
        self.sent.append(("killpg", pgid, sig))


@pytest.fixture
def signals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every signal the job table sends, recorded instead of sent (only there)."""
    fake = _RecordingOs()
    monkeypatch.setattr(service_jobs, "os", fake)
    return fake.sent


def test_a_crafted_table_never_gets_a_foreign_process_signalled(
    tmp_path: Path, signals: list[tuple[str, int, int]]
) -> None:
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)  # not our wrapper
    try:
        created = psutil.Process(stranger.pid).create_time()
        rows = [
            # pid and start time right, even a stop due for SIGKILL: still not our wrapper
            _row(id="000a", pid=stranger.pid, pid_created=created, stop_requested=1.0),
            _row(id="000b", pid=1, pid_created=None, stop_requested=1.0),
            _row(id="000c", pid=os.getpid(), pid_created=psutil.Process().create_time()),
        ]
        (tmp_path / "jobs.json").write_text(json.dumps(rows))
        table = JobTable(tmp_path)
        for job in table.jobs.values():
            table.stop(job)
        table.pump()
        assert signals == []
        for job in table.jobs.values():
            assert job.state is JobState.LOST and "not provably" in job.note, job
            assert "not signalled" in job_line(job.public())
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_rows_that_are_not_jobs_are_dropped_and_the_file_kept(tmp_path: Path) -> None:
    rows = [
        _row(id="../../escape", state="queued"),  # would name files outside the folder
        _row(id="0002", pid="1"),
        _row(id="0003", submitted=float("nan")),
        "not a row",
        _row(id="0004", state="finished", pid=None),
    ]
    (tmp_path / "jobs.json").write_text(json.dumps(rows))
    table = JobTable(tmp_path)
    assert list(table.jobs) == ["0004"]
    assert list(tmp_path.glob("jobs.broken-*"))


def test_a_real_wrapper_is_still_stopped_after_a_restart(tmp_path: Path) -> None:
    first = JobTable(tmp_path)
    code = "import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    raise SystemExit(130)"
    job = first.submit(_py(code), "sleeper", str(REPO), dict(os.environ))
    time.sleep(0.8)  # the child installs its Ctrl-C handler
    second = JobTable(tmp_path)  # a restarted service proves the wrapper from the table
    adopted = second.jobs[job.id]
    assert adopted.state is JobState.RUNNING
    second.stop(adopted)
    _wait(lambda: adopted.state.ended, 20, "the stopped job", second.pump)
    assert adopted.state is JobState.STOPPED and adopted.returncode == 130
    first.pump()  # reap our own child


# -- requests ---------------------------------------------------------------------------------
@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[TestClient, JobTable]]:
    table = JobTable(tmp_path)
    with TestClient(Service(table, idle=60).app()) as client:  # a 500 would raise here
        yield client, table


def _good(**fields: Any) -> dict[str, Any]:
    return {"argv": _py("pass"), "cwd": str(REPO), "env": {"A": "1"}} | fields


DEEP = '{"argv": ' + "[" * 5000 + "]" * 5000 + "}"
BAD_BODIES: list[tuple[str, bytes | str]] = [
    ("not JSON", "argv=1"),
    ("not UTF-8", b'{"argv": ["\xff"]}'),
    ("a list", "[1, 2]"),
    ("a string", '"job"'),
    ("deep", DEEP),
    ("huge int", '{"argv": [' + "9" * 5000 + "]}"),
    ("huge float", '{"argv": 1e999999}'),
    ("argv str", json.dumps(_good(argv="python"))),
    ("argv empty", json.dumps(_good(argv=[]))),
    ("argv int", json.dumps(_good(argv=[1]))),
    ("argv NUL", json.dumps(_good(argv=["py\u0000"]))),
    ("argv surrogate", json.dumps(_good(argv=["\ud800"]))),
    ("env list", json.dumps(_good(env=["A=1"]))),
    ("env int value", json.dumps(_good(env={"A": 1}))),
    ("env null value", json.dumps(_good(env={"A": None}))),
    ("env = in name", json.dumps(_good(env={"A=B": "1"}))),
    ("env empty name", json.dumps(_good(env={"": "1"}))),
    ("cwd relative", json.dumps(_good(cwd="tmp"))),
    ("cwd NUL", json.dumps(_good(cwd="/tmp\u0000"))),
    ("cwd int", json.dumps(_good(cwd=3))),
    ("cwd missing dir", json.dumps(_good(cwd="/no/such/dir"))),
    ("title int", json.dumps(_good(title=5))),
    ("title huge", json.dumps(_good(title="t" * 10000))),
    ("meta int", json.dumps(_good(meta={"k": 1}))),
    ("meta list", json.dumps(_good(meta=["k"]))),
    ("meta many", json.dumps(_good(meta={str(i): "v" for i in range(100)}))),
    ("argv too many", json.dumps(_good(argv=["x"] * 10000))),
    ("argv item huge", json.dumps(_good(argv=["x" * 200_000]))),
]


@pytest.mark.parametrize("body", [b for _, b in BAD_BODIES], ids=[n for n, _ in BAD_BODIES])
def test_a_malformed_submission_gets_a_4xx_that_says_what_is_wrong(
    api: tuple[TestClient, JobTable], body: bytes | str
) -> None:
    client, table = api
    answer = client.post("/jobs", content=body)
    assert 400 <= answer.status_code < 500, answer.text
    assert isinstance(answer.json()["error"], str) and answer.json()["error"]
    assert table.jobs == {}


@pytest.mark.parametrize("offset", ["abc", "-1", "1.5", "99999999999999999999999", "²", "0x10"])
def test_a_bad_offset_gets_a_400(api: tuple[TestClient, JobTable], offset: str) -> None:
    client, _ = api
    job = client.post("/jobs", json=_good()).json()
    for what in ("log", "events"):
        answer = client.get(f"/jobs/{job['id']}/{what}", params={"offset": offset})
        assert answer.status_code == 400 and "offset" in answer.json()["error"]


def test_unknown_routes_and_methods_answer_json(api: tuple[TestClient, JobTable]) -> None:
    client, _ = api
    for answer in (client.get("/nope"), client.delete("/jobs"), client.get("/jobs/ffff")):
        assert 400 <= answer.status_code < 500 and answer.json()["error"]


def test_a_body_over_the_limit_gets_413(api: tuple[TestClient, JobTable]) -> None:
    client, table = api
    body = json.dumps(_good(env={f"V{i}": "x" * 1000 for i in range(5000)}))
    assert client.post("/jobs", content=body).status_code == 413
    assert table.jobs == {}


def _raw(home: Path, head: bytes, body: bytes) -> bytes:
    """Sends a request by hand and returns the start of the answer (what arrives in 10 s)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(home / "run" / "service.sock"))
    try:
        sock.sendall(head)
        with contextlib.suppress(OSError):  # the service may close once it has seen enough
            sock.sendall(body)
        return sock.recv(200)
    finally:
        sock.close()


def test_the_live_service_refuses_big_and_bad_requests_without_a_traceback(
    live_service: Path,
) -> None:
    big = b"x" * (5 * 1024 * 1024)
    # Claims 100 MB: refused on the claim, never waiting for 100 MB.
    head = b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"
    assert _raw(live_service, head, big).startswith(b"HTTP/1.1 413")
    # Claims nothing (chunked): refused once more than the limit arrived.
    head = b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked = b"%x\r\n%s\r\n" % (len(big), big)
    assert _raw(live_service, head, chunked).startswith(b"HTTP/1.1 413")
    client = ServiceClient()
    for body in ([1], {"argv": [1]}, {"argv": ["x"], "env": {"A": 2}}):
        answer = client.request("POST", "/jobs", json_body=body)
        assert answer.status_code == 400 and answer.json()["error"]
    assert client.request("GET", "/jobs/x/log", params={"offset": "abc"}).status_code in (400, 404)
    assert client.request("GET", "/jobs").json() == []
    assert "Traceback" not in _service_log(live_service)


# -- what is shown ---------------------------------------------------------------------------
def test_no_header_or_key_secret_in_a_title_a_log_or_a_listing(
    api: tuple[TestClient, JobTable],
) -> None:
    client, table = api
    naive_title = "tunelab " + " ".join(HOSTILE_ARGS)  # a client that did not redact
    job = client.post("/jobs", json=_good(argv=_py("pass", *HOSTILE_ARGS), title=naive_title))
    assert job.status_code == 201
    _wait(lambda: table.jobs[job.json()["id"]].state.ended, 30, "the job", table.pump)
    shown = [
        job.text,
        client.get("/jobs").text,
        client.get(f"/jobs/{job.json()['id']}").text,
        table.log_path(table.jobs[job.json()["id"]]).read_text(),
        (table.folder / "jobs.json").read_text(),
    ]
    for text in shown:
        assert not any(secret in text for secret in SECRETS), text
    assert "Authorization" in job.json()["title"]  # the title still says what ran


def test_the_client_titles_a_job_without_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: dict[str, Any] = {}

    def capture(self: ServiceClient, method: str, url: str, **kwargs: Any) -> Any:
        sent.update(kwargs["json_body"])
        return type("R", (), {"json": lambda self: {}})()

    monkeypatch.setattr(ServiceClient, "_call", capture)
    ServiceClient().submit(HOSTILE_ARGS)
    assert sent["title"].startswith("tunelab bench --header")
    assert not any(secret in sent["title"] for secret in SECRETS)


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\u202eevil\r\x9b1m"


def test_job_lines_carry_no_escape_sequences() -> None:
    job = {"id": "00ff", "state": "lost", "title": ESCAPES, "note": ESCAPES, "submitted": 0.0}
    line = job_line(job, now=1.0)
    assert not any(ch in line for ch in "\x1b\x07\r\x9b\u202e")
    assert "red" in line


def test_the_service_lists_titles_without_escape_sequences(
    api: tuple[TestClient, JobTable],
) -> None:
    client, _ = api
    client.post("/jobs", json=_good(title=ESCAPES))
    title = client.get("/jobs").json()[0]["title"]
    assert not any(ch in title for ch in "\x1b\x07\r\x9b\u202e")


class _FakeClient:
    """What ``tunelab jobs`` reads, hostile: titles, notes and a log with escapes."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __enter__(self) -> _FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def recorded_jobs(self) -> list[dict[str, Any]]:
        return [{"id": "00ff", "state": "lost", "title": ESCAPES, "note": ESCAPES, "submitted": 0}]

    def log(self, job_id: str, offset: int = 0) -> Any:
        text = ESCAPES if offset == 0 else ""
        return type("C", (), {"text": text, "next_offset": offset + len(text)})()


def test_tunelab_jobs_prints_no_escape_sequences(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_jobs, "ServiceClient", _FakeClient)
    for args in ([], ["log", "00ff"]):
        result = CliRunner().invoke(cli_jobs.jobs_app, args)
        assert result.exit_code == 0, result.output
        assert "red" in result.output
        assert not any(ch in result.output for ch in "\x1b\x07\x9b"), repr(result.output)
