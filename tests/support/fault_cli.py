"""The bad CLI invocations of the reliability suite, and how to tell that nothing was written.

Shared by ``tests/test_reliability_cli_values.py`` and
``benchmarks/fault_loops.py``. ``bad_cases`` lists (name, argv) pairs that
each must be refused; ``snapshot`` records every path under some roots
(except TUNELAB_HOME's cache dir) with its size and mtime, so a comparison
before and after shows any write; ``_empty_store`` names the harmless
changes (a reading command creating the data dir or an *empty* store).
"""

from __future__ import annotations

import os
from pathlib import Path


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            if Path(dirpath) == root:
                dirnames[:] = [d for d in dirnames if d != "cache"]
            for name in dirnames + filenames:
                path = Path(dirpath) / name
                st = path.lstat()
                out[str(path)] = (st.st_size, st.st_mtime_ns)
    return out


def _empty_store(home: Path, changed: set[str]) -> set[str]:
    """Reading commands may create the data dir and an *empty* store; that is not a write.

    Returns the changed paths that are only that (the data dir, and the store
    files when the store holds no trial), to be ignored.
    """
    import sqlite3

    data = home / "data"
    db = data / "tunelab.db"
    benign = {str(data)}
    if db.exists():
        conn = sqlite3.connect(db)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            empty = (
                "trials" not in tables
                or conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 0
            )
        finally:
            conn.close()
        if empty:
            benign |= {str(db), f"{db}-wal", f"{db}-shm"}
    return changed & benign


def bad_cases(tmp: Path, *, probe: bool = False) -> list[tuple[str, list[str]]]:
    """(name, argv) of every bad invocation; ``probe`` only counts them (writes nothing)."""
    a_file = tmp / "a-file.txt"
    if not probe:
        a_file.write_text("not a directory, not a database\n")
    return [
        ("negative prompts", ["run", "--num-prompts", "-1"]),
        ("zero concurrency", ["run", "--concurrency", "0"]),
        ("negative rate", ["run", "--request-rate", "-3"]),
        ("rate not a number", ["run", "--request-rate", "lots"]),
        ("length not a number", ["run", "--input-len", "abc"]),
        ("absurd warmup", ["run", "--warmup", "-7"]),
        ("negative knob", ["run", "--set", "max-num-seqs=-1"]),
        ("knob wrong type", ["run", "--set", "max-num-seqs=many"]),
        ("unknown knob", ["run", "--set", "max-num-seqz=8"]),
        ("assignment without value", ["run", "--set", "max-num-seqs"]),
        ("negative slo", ["run", "--slo", "ttft:-5"]),
        ("unknown slo key", ["run", "--slo", "latency:5"]),
        ("preset missing", ["run", "--preset", str(tmp / "missing.toml")]),
        ("model path missing", ["run", "--model", str(tmp / "no-such-model-dir")]),
        ("model placeholder unknown", ["run", "--model", "tunelab:nope"]),
        ("startup timeout zero", ["run", "--startup-timeout", "0"]),
        ("store under a file", ["run", "--store", str(a_file / "x.db")]),
        ("store is not sqlite", ["results", "--store", str(a_file)]),
        ("results unknown status", ["results", "--status", "bogus"]),
        ("show unknown trial", ["show", "zzzzzzzz"]),
        ("check zero gpus", ["check", "--gpus", "0"]),
        ("check unknown platform", ["check", "--platform", "tpu"]),
        ("check knob wrong type", ["check", "--set", "max-num-seqs=abc"]),
        ("export unknown trial", ["export", "nope-not-a-trial", "--out", str(tmp / "out")]),
        (
            "export unknown preset",
            ["export", "--preset", "no-such-preset", "--out", str(tmp / "out")],
        ),
        (
            "export unknown format",
            ["export", "--preset", "cpu-demo", "--format", "exe", "--out", str(tmp / "out")],
        ),
        ("export out is a file", ["export", "--preset", "cpu-demo", "--out", str(a_file)]),
        ("bench negative prompts", ["bench", "--url", "http://127.0.0.1:9", "--num-prompts", "-4"]),
        (
            "bench dataset missing",
            ["bench", "--url", "http://127.0.0.1:9", "--dataset", str(tmp / "none.json")],
        ),
        ("bench unreachable", ["bench", "--url", "http://127.0.0.1:9", "--num-prompts", "1"]),
        ("bench not a url", ["bench", "--url", "not a url", "--num-prompts", "1"]),
    ]
