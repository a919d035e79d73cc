"""Hostile user input (issue 26): the files a user names and the numbers a user types.

Every case goes through the real ``tunelab`` entry point (``tui.cli.main``, the
top-level handler included) and must end with exit code 2, tunelab's one-line
message and its fix, no traceback and no crash-report file.

The files (``--dataset``, ``--guard-prompts``, a preset's ``[workload]`` under
``presets verify``, a job spec) are tried as /dev/zero, a FIFO that a thread
keeps writing to, a /proc file that reports 0 bytes and never ends, and a
regular file over the limit. Those run in a child process with its address
space capped, an engine tripwire and the limits lowered (so "too large" is a
small file): a reader that trusts ``st_size`` or blocks on a FIFO then fails
the test with a MemoryError or a timeout instead of taking the machine down.

The numbers (lengths, prompts, rates, repeats, probes, timeouts) and the SLOs
run in-process, with ``Engine.start`` replaced by a tripwire: a refused
command must never get as far as an engine.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui import cli as tui_cli
from tuner import paths
from tuner.bench.metrics import compute_metrics
from tuner.bench.workload import (
    MAX_CONCURRENCY,
    MAX_LEN,
    MAX_NUM_PROMPTS,
    Workload,
    WorkloadError,
)
from tuner.config import EngineConfig
from tuner.lab.job_spec import ABJobSpec, read_spec
from tuner.lab.limits import MAX_LAUNCHES, MAX_PROBES, MAX_REPEATS, MAX_TRIALS
from tuner.lab.workload import workload_from_texts
from tuner.studies.slo import check_key

REPO = Path(__file__).resolve().parents[1]
SMALL_LIMIT = 64 * 1024  # the file limits in the child, so "too large" is a small file
ADDRESS_SPACE = 4 * 1024**3  # the child dies of MemoryError long before the machine does
PAGEMAP = Path("/proc/self/pagemap")  # reports 0 bytes; reads go on for the address space

# The child: an engine tripwire, the file limits lowered, then each command line in turn
# through the real entry point, its exit code after a marker on stderr.
_CHILD = """
import json
import sys
from tuner.engine import server

async def _tripwire(self):
    raise SystemExit("a refused command started an engine")

server.Engine.start = _tripwire
import tuner.bench.prompts
import tuner.guard.settings
import tuner.lab.job_spec

limit = int(sys.argv[1])
tuner.bench.prompts.MAX_DATASET_BYTES = limit
tuner.guard.settings.MAX_FILE_BYTES = limit
tuner.lab.job_spec.MAX_SPEC_BYTES = limit
from tui.cli import main

for argv in json.loads(sys.argv[2]):
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 99
    sys.stdout.flush()
    sys.stderr.write(f"\\n@@END {code}\\n")
    sys.stderr.flush()
"""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _child(home: Path, cases: dict[str, list[str]]) -> dict[str, tuple[int, str]]:
    """Each case's (exit code, stderr), run in one child with capped memory.

    A reader that blocks on a FIFO times the test out; one that trusts the
    reported size dies of MemoryError (a crash report, exit 70) in the child.
    """
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(SMALL_LIMIT), json.dumps(list(cases.values()))],
        cwd=REPO,
        env={**os.environ, "TUNELAB_HOME": str(home), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_cap_memory,
    )
    parts = done.stderr.split("\n@@END ")
    assert len(parts) == len(cases) + 1, done.stdout + done.stderr
    out: dict[str, tuple[int, str]] = {}
    for i, name in enumerate(cases):
        code, _, _ = parts[i + 1].partition("\n")
        err = parts[i].split("\n", 1)[1] if i else parts[i]  # drop the previous marker's code
        out[name] = (int(code), err)
    assert "Traceback" not in done.stdout, done.stdout
    return out


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO with a writer thread that writes to every reader that opens it, forever."""
    path = tmp_path / "feed.fifo"
    os.mkfifo(path)
    stop = threading.Event()
    chunk = b'[{"conversations": [{"from": "human", "value": "x"}]},' * 1024

    def write_forever() -> None:
        while not stop.is_set():
            fd = os.open(path, os.O_WRONLY)  # blocks until a reader opens the FIFO
            try:
                while not stop.is_set():
                    os.write(fd, chunk)
            except OSError:  # that reader went away (EPIPE): wait for the next
                pass
            finally:
                os.close(fd)

    writer = threading.Thread(target=write_forever, daemon=True)
    writer.start()
    yield path
    stop.set()
    # A writer waiting in open() is released by a reader that opens and leaves.
    os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    writer.join(timeout=10)


def _hostile_file(kind: str, tmp_path: Path, fifo: Path) -> tuple[str, str]:
    """(path, what the message must name) for one kind of hostile file."""
    if kind == "dev-zero":
        return "/dev/zero", "not a regular file"
    if kind == "fifo":
        return str(fifo), "not a regular file (a FIFO)"
    if kind == "proc":
        if not os.access(PAGEMAP, os.R_OK):
            pytest.skip("no readable /proc/self/pagemap here")
        return str(PAGEMAP), str(PAGEMAP)
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b" " * SMALL_LIMIT + b"]")  # valid JSON, one byte over the limit
    return str(big), "larger than"


def _preset(tmp_path: Path, workload: str) -> Path:
    """A preset with [results] (so verify gets as far as its [workload]) and ``workload``."""
    path = tmp_path / "hostile.toml"
    path.write_text(
        '[preset]\nname = "hostile"\nschema_version = 1\n\n[target]\nmodel = "org/model"\n\n'
        "[env]\n\n[engine]\nmax-num-seqs = 8\n\n"
        f"[workload]\n{workload}\n\n"
        '[results]\nobjective = "output_throughput"\noutput_throughput = 100.0\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "proc", "too-large"])
def test_every_user_named_file_is_read_bounded(kind: str, tmp_path: Path, fifo: Path) -> None:
    """--dataset (ShareGPT and JSONL kinds), --guard-prompts, a preset's [workload]
    dataset under ``presets verify`` and a job spec: exit 2 with message and fix."""
    path, needle = _hostile_file(kind, tmp_path, fifo)
    bench = ["bench", "--url", "http://127.0.0.1:9", "--model", "m", "--num-prompts", "1"]
    preset = _preset(tmp_path, f"num_prompts = 4\ndataset_path = {json.dumps(path)}")
    cases = {
        "bench --dataset": [*bench, "--dataset", path],
        "bench --dataset-kind trace": [*bench, "--dataset-kind", "trace", "--dataset", path],
        "run --guard-prompts": ["run", "--model", "org/model", "--guard-prompts", path],
        "presets verify [workload]": ["presets", "verify", str(preset)],
        "jobs run-spec": ["jobs", "run-spec", path],
    }
    home = tmp_path / "home"
    for name, (code, err) in _child(home, cases).items():
        assert code == 2, f"{name}: exit {code}\n{err}"
        assert "Traceback" not in err and "internal error" not in err, f"{name}: {err}"
        assert needle in err and "fix:" in err, f"{name}: {err}"
    assert sorted((home / "data" / "crashes").glob("crash-*")) == []


# -- numbers and texts, in-process --------------------------------------------------------


def _main(argv: list[str]) -> int:
    try:
        tui_cli.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    code = _main(argv)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in out + err and "internal error" not in out + err, err
    for needle in needles:
        assert needle in err, err
    assert sorted(paths.crash_dir().glob("crash-*")) == [], err
    return err


BIG = "100000000000"  # 1e11 written out: the CLI's whole-number options take digits
ARM = ["--a-set", "max-num-seqs=8"]
SLO = ["--slo", "p99_ttft_ms<=500"]
ABSURD = [
    (["run", "--input-len", BIG], ["--input-len", f"{MAX_LEN:,}"]),
    (["run", "--output-len", BIG], ["--output-len", f"{MAX_LEN:,}"]),
    (["run", "--num-prompts", BIG], ["--num-prompts", f"{MAX_NUM_PROMPTS:,}"]),
    (["run", "--concurrency", BIG], ["--concurrency", f"{MAX_CONCURRENCY:,}"]),
    (["run", "--warmup", BIG], ["--warmup", f"{MAX_NUM_PROMPTS:,}"]),
    (["run", "--seed", "1" + "0" * 30], ["--seed"]),
    # Each within its own bound, together far over what a run may build in memory.
    (["run", "--input-len", str(MAX_LEN), "--num-prompts", str(MAX_NUM_PROMPTS)], ["tokens"]),
    (["run", "--startup-timeout", "inf"], ["--startup-timeout"]),
    (["run", "--startup-timeout", "nan"], ["--startup-timeout"]),
    (["ab", *ARM, "--input-len", BIG], ["--input-len"]),
    (["ab", *ARM, "--repeats", BIG], ["--repeats", str(MAX_REPEATS)]),
    (["ab", *ARM, "--max-repeats", BIG], ["--max-repeats", str(MAX_REPEATS)]),
    (["sweep", "max-num-seqs=8,16", "--repeats", BIG], ["--repeats", str(MAX_REPEATS)]),
    (["sweep", "max-num-seqs=8,16", "--num-prompts", BIG], ["--num-prompts"]),
    (["tune", "--trials", BIG, "--param", "max-num-seqs=8,16"], ["--trials", str(MAX_TRIALS)]),
    (["tune", "--trials", "2", "--param", "max-num-seqs=8,16", "--concurrency", BIG], []),
    (["capacity", *SLO, "--probes", "1000000000"], ["--probes", str(MAX_PROBES)]),
    (["capacity", *SLO, "--launches", BIG], ["--launches", str(MAX_LAUNCHES)]),
    (["capacity", *SLO, "--max", "1e9"], ["--max", f"{MAX_CONCURRENCY:,}"]),
    (["capacity", *SLO, "--by", "rate", "--max", "1e12"], ["--max"]),
    (["capacity", *SLO, "--by", "rate", "--step", "1e-320"], ["--start", "--step"]),
    (["capacity", *SLO, "--output-len", BIG], ["--output-len"]),
    (["ablate", "nosuchtrial", "--repeats", BIG], ["--repeats", str(MAX_REPEATS)]),
    (["ablate", "nosuchtrial", "--max-repeats", BIG], ["--max-repeats"]),
    (["presets", "verify", "cpu-demo", "--repeats", BIG], ["--repeats", str(MAX_REPEATS)]),
]


@pytest.mark.parametrize(("argv", "needles"), ABSURD, ids=[" ".join(a) for a, _ in ABSURD])
def test_absurd_numbers_are_refused_naming_the_option(
    argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str], no_engine: list[str]
) -> None:
    _refused(capsys, argv, *needles)
    assert no_engine == []


RATES = ["1e-320", "5e-324", "-1", "-inf", "nan", "0"]


@pytest.mark.parametrize("rate", RATES)
def test_tiny_negative_and_nan_rates_are_refused(
    rate: str, capsys: pytest.CaptureFixture[str], no_engine: list[str]
) -> None:
    _refused(capsys, ["run", "--request-rate", rate], "--request-rate")
    _refused(capsys, ["ab", *ARM, "--request-rate", rate], "--request-rate")
    assert no_engine == []


BENCH_FLOATS = [
    ("--request-rate", "1e-320"),
    ("--burstiness", "1e-300"),
    ("--burstiness", "nan"),
    ("--burstiness", "inf"),
    ("--range-ratio", "nan"),
    ("--duration", "inf"),
    ("--duration", "1e300"),
    ("--request-timeout", "nan"),
    ("--stall-timeout", "inf"),
    ("--num-prompts", BIG),
    ("--prefix-len", BIG),
]


@pytest.mark.parametrize(("flag", "value"), BENCH_FLOATS)
def test_bench_workload_numbers_are_bounded(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--url", "http://127.0.0.1:9", "--model", "m", flag, value]
    err = _refused(capsys, argv)
    field = flag.lstrip("-").replace("-", "_")
    assert field.split("_")[0] in err  # the field is named (request_rate, burstiness, ...)
    assert "cannot reach" not in err  # refused before any request


TUNE = ["tune", "--trials", "2", "--param", "max-num-seqs=8,16"]
KNOWN = ["p99_ttft_ms", "output_throughput"]  # the known metrics the message lists
BAD_SLOS = [
    (["run", "--slo", ",,,"], ["holds no KEY:MS pair"]),
    (["run", "--slo", " , "], ["holds no KEY:MS pair"]),
    (["run", "--slo", "ttft:inf"], ["finite"]),
    (["ab", *ARM, "--slo", ",,,"], []),
    ([*TUNE, "--slo", "bogus>=5"], ["'bogus'", *KNOWN]),
    (["sweep", "max-num-seqs=8,16", "--slo", "bogus<=5"], ["'bogus'", *KNOWN]),
    (["ab", *ARM, "--slo", "p99_bogus_ms<=5"], ["not measured", "ttft"]),
    ([*TUNE, "--slo", "p99_ttft_ms<=1e999"], ["finite"]),
    (["capacity", "--slo", ",,,"], ["empty"]),
    (["capacity", "--slo", "bogus>=5"], ["not a result key", *KNOWN]),
]


@pytest.mark.parametrize(("argv", "needles"), BAD_SLOS, ids=[" ".join(a) for a, _ in BAD_SLOS])
def test_bad_slos_are_refused(
    argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str], no_engine: list[str]
) -> None:
    _refused(capsys, argv, *needles)
    assert no_engine == []


def test_every_metric_the_benchmark_reports_is_a_known_slo_key() -> None:
    """The SLO key check must not refuse a key a trial really has (a real bound never met)."""
    metrics = compute_metrics([], 1.0)
    # rtfx is vLLM's audio-only key, always 0 here: kept for key parity, nothing to bound.
    numeric = [k for k, v in metrics.items() if isinstance(v, int | float) and k != "rtfx"]
    for key in [*numeric, "p99_ttft_ms", "median_itl_ms", "mean_e2el_ms", "energy_j"]:
        check_key(key)


# -- job specs -------------------------------------------------------------------------------


def _good_spec() -> dict[str, object]:
    a = EngineConfig(model="org/model")
    b = EngineConfig(model="org/model", engine={"max-num-seqs": 8})
    return ABJobSpec("s", None, a, b, Workload(), 3, 600.0).to_dict()


def _spec_cases() -> list[tuple[str, object]]:
    good = _good_spec()
    workload = dict(good["workload"])  # type: ignore[call-overload]
    return [
        ("array", []),
        ("string", "x"),
        ("null", None),
        ("number", 5),
        ("nan timeout", {**good, "startup_timeout": math.nan}),
        ("negative timeout", {**good, "startup_timeout": -1}),
        ("inf timeout", {**good, "startup_timeout": math.inf}),
        ("text timeout", {**good, "startup_timeout": "soon"}),
        ("huge repeats", {**good, "repeats": 10**9}),
        ("nan repeats", {**good, "repeats": math.nan}),
        ("inf repeats", {**good, "repeats": math.inf}),
        ("negative repeats", {**good, "repeats": -1}),
        ("bool repeats", {**good, "repeats": True}),
        ("huge int repeats", {**good, "repeats": 10**400}),
        ("config not an object", {**good, "a": "x"}),
        ("env not an object", {**good, "b": {"model": "m", "env": "ABC"}}),
        ("workload an array", {**good, "workload": []}),
        ("workload huge", {**good, "workload": {**workload, "num_prompts": 10**11}}),
        ("workload denormal rate", {**good, "workload": {**workload, "request_rate": 1e-320}}),
        ("workload nan burstiness", {**good, "workload": {**workload, "burstiness": math.nan}}),
        ("workload text length", {**good, "workload": {**workload, "input_len": "128"}}),
        ("workload slo text", {**good, "workload": {**workload, "slo": {"ttft": "x"}}}),
        ("workload dev zero", {**good, "workload": {**workload, "dataset_path": "/dev/zero"}}),
        ("study a number", {**good, "study": 5}),
        ("missing fields", {"version": 1, "kind": "ab"}),
    ]


@pytest.mark.parametrize(("name", "data"), _spec_cases(), ids=[n for n, _ in _spec_cases()])
def test_bad_job_specs_are_user_errors(
    name: str,
    data: object,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_engine: list[str],
) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN/Infinity as Python writes them
    err = _refused(capsys, ["jobs", "run-spec", str(path)])
    assert "fix:" in err
    assert no_engine == []


def test_a_good_job_spec_still_reads_back(tmp_path: Path) -> None:
    spec = ABJobSpec.from_dict(_good_spec())
    assert read_spec(spec.write(tmp_path)) == spec


# -- the workload's own bounds (what the TUI's panel and every face build through) ----------


@pytest.mark.parametrize(
    ("texts", "needle"),
    [
        ({"input_len": BIG}, "in must be at most"),
        ({"num_prompts": BIG}, "n must be at most"),
        ({"concurrency": BIG}, "conc must be at most"),
        ({"request_rate": "1e-320"}, "rate must be"),
        ({"request_rate": "-4"}, "rate"),
    ],
)
def test_the_tui_panel_texts_are_bounded(texts: dict[str, str], needle: str) -> None:
    with pytest.raises(WorkloadError, match=needle):
        workload_from_texts(texts)


@pytest.mark.parametrize(
    "fields",
    [
        {"input_len": 10**11},
        {"num_prompts": 10**11},
        {"warmup_requests": -1},
        {"concurrency": 1.5},
        {"request_rate": 1e-320},
        {"request_rate": 10**400},
        {"burstiness": 0.0},
        {"duration_s": math.nan},
        {"request_timeout_s": math.inf},
        {"stall_timeout_s": -1.0},
        {"prefix_groups": 10**9, "prefix_len": 10, "dataset_kind": "prefix"},
        {"slo": {"ttft": math.nan}},
        {"slo": ["ttft"]},
        {"text_prompts": "yes"},
        {"dataset_path": 5},
    ],
)
def test_a_stored_or_sent_workload_is_checked_whole(fields: dict[str, object]) -> None:
    """Workload.from_dict is how a job spec, a preset and a store row become a workload."""
    with pytest.raises(WorkloadError):
        Workload.from_dict({**Workload().to_dict(), **fields})


def test_whole_floats_in_a_preset_are_counts() -> None:
    wl = Workload.from_dict({"input_len": 128.0, "num_prompts": 8.0})
    assert wl.input_len == 128 and isinstance(wl.input_len, int)


def test_a_workload_that_is_not_a_table_is_a_workload_error() -> None:
    for data in ([], "x", None, 5):
        with pytest.raises(WorkloadError, match="table of fields"):
            Workload.from_dict(data)  # type: ignore[arg-type]
