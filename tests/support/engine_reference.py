"""What tunelab's client and `vllm bench serve` are both checked against: the engine itself.

Used by tests/test_bench_engine.py and benchmarks/client_agreement.py: one
prompt file both clients read (so they send the same requests), and the
engine's own latency histograms (vLLM 0.32, vllm/v1/metrics/loggers.py),
whose ``_sum``/``_count`` deltas around a run are the exact means of that
run's requests. And the core layout under which a client's overhead can be
read at all on a small CPU box (:func:`client_cores`).
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil

from tuner.bench import Workload
from tuner.bench.prompts import pool_from_tokenizer, random_prompts
from tuner.bench.server_metrics import parse_prometheus
from tuner.engine.cpu_layout import pin_threads, threads

# The engine's histograms per client metric.
ENGINE_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2el": "vllm:e2e_request_latency_seconds",
}


def engine_page(url: str) -> dict[str, list[float]]:
    """The engine's /metrics page, parsed (metric name -> one value per label set)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        return parse_prometheus(resp.read().decode())


def engine_sums(url: str) -> dict[str, tuple[float, float]]:
    """(sum in s, count) of each engine histogram, summed over label sets."""
    page = engine_page(url)
    return {
        k: (sum(page.get(f"{n}_sum", [0.0])), sum(page.get(f"{n}_count", [0.0])))
        for k, n in ENGINE_HISTOGRAMS.items()
    }


def write_shared_prompts(
    model: Path, path: Path, count: int, input_len: int, output_len: int
) -> Path:
    """One ShareGPT-format file of random text prompts (tunelab's generator) both clients read."""
    wl = Workload(
        input_len=input_len, output_len=output_len, num_prompts=count, text_prompts=True, seed=7
    )
    rows = [
        {"id": str(i), "conversations": [
            {"from": "human", "value": p.prompt}, {"from": "gpt", "value": "x " * output_len}]}
        for i, p in enumerate(random_prompts(wl, pool_from_tokenizer(model), count))
    ]  # fmt: skip
    path.write_text(json.dumps(rows))
    return path


@contextlib.contextmanager
def client_cores(server: set[int]) -> Iterator[set[int] | None]:
    """Keep vLLM CPU's busy-polling processes off the cores the clients and the API server use.

    On CPU, vLLM binds its worker to the cores it computes on and leaves the
    others ("reserved") to the rest, but its EngineCore process is not bound,
    and both it and the worker busy-poll their shared-memory queue (a
    ``sched_yield`` loop for a second after each read) while requests run. On
    a 2-core box the EngineCore's loop then competes with the API server and
    the client for the one free core, and a client's TTFT excess over the
    engine's own figure jumped between +3 and +370 ms from run to run for
    *both* clients (measured with /proc schedstat; nothing else was running).
    Pinning the EngineCore beside the worker and the API server plus the
    clients on the remaining cores made it +2.0 to +4.8 ms in every one of 27
    runs, the engine's own TTFT unchanged (~10 ms). That is the layout under which a
    client's own overhead is what is measured.

    Yields the cores the clients must run on, or None where the box cannot be
    split (one core, or a worker not bound): then nothing is changed. Every
    thread's affinity is restored on exit, so the shared engine serves later
    tests as vLLM laid it out.
    """
    procs = {}
    for pid in server:
        with contextlib.suppress(psutil.Error):
            procs[pid] = psutil.Process(pid)
    everything = set(os.sched_getaffinity(0))
    workers = [p for p in procs.values() if _name(p).startswith("VLLM::Worker")]
    engine_cores: set[int] = set()
    for w in workers:
        with contextlib.suppress(psutil.Error):
            engine_cores |= set(w.cpu_affinity())
    free = everything - engine_cores
    api = [p for p in procs.values() if _parent(p) not in procs]
    if not workers or not engine_cores or not free or len(api) != 1:
        yield None
        return
    saved = {(pid, tid): os.sched_getaffinity(tid) for pid in procs for tid in threads(pid)}
    try:
        for pid in procs:
            pin_threads(pid, free if pid == api[0].pid else engine_cores)
        yield free
    finally:
        for pid in procs:
            main = saved.get((pid, pid), everything)
            for tid in threads(pid):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(tid, saved.get((pid, tid), main))


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:
        return ""


def _parent(proc: psutil.Process) -> int | None:
    try:
        return proc.ppid()
    except psutil.Error:
        return None
