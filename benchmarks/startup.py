"""Prints how fast `tunelab --help` and `tunelab doctor` start (medians of N runs).

Usage: .venv/bin/python benchmarks/startup.py [--runs 7]
The doctor figure uses the cached vLLM introspection (the first run after an
install probes vLLM in a subprocess and takes a few seconds; it is run once
here before timing).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _time(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    exe = shutil.which("tunelab", path=str(Path(sys.executable).parent)) or "tunelab"
    subprocess.run([exe, "doctor"], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    py = _time([sys.executable, "-c", "pass"], args.runs)
    help_t = _time([exe, "--help"], args.runs)
    doctor_t = _time([exe, "doctor"], args.runs)
    print(f"python -c pass : median {statistics.median(py) * 1000:7.1f} ms")
    print(f"tunelab --help : median {statistics.median(help_t) * 1000:7.1f} ms  (goal < 1000 ms)")
    print(
        f"tunelab doctor : median {statistics.median(doctor_t) * 1000:7.1f} ms  (goal < 1000 ms, cached probe)"
    )


if __name__ == "__main__":
    main()
