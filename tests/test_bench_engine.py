"""tunelab's client reads the engine's clock as well as vLLM's own `vllm bench serve`.

Both clients send the *same* requests — one ShareGPT-format file of 96
random-token text prompts of 128 tokens (made by tunelab's prompt
generator), 32 output tokens forced with ignore_eos + min_tokens — paced at
20 requests/s with gamma-4 arrivals and at most 8 in flight, against the
session's real tiny-Llama CPU engine, in rounds of one tunelab run then one
vLLM run. Each client runs as its own process, as a user runs it.

Why the same file, and why the engine is the reference. Three CI failures of
the first version of this test (tunelab's median TPOT 8.3-10.7 ms against
vLLM's 4.7-6.9) came from comparing two different workloads and an engine
that moves under them. vLLM's ``random`` dataset builds each prompt from
*consecutive* token ids at a seeded offset, and the same ones every run, so
on this engine it hit the prefix cache for 3,712 of 13,355 prompt tokens per
run where tunelab's random prompts hit 384: vLLM's runs gave the engine less
prefill, and the engine's *own* TTFT and TPOT (its histograms) were lower in
them — 35 vs 90 ms TTFT in one round — with no client involved. And the box
moves between states: the engine's own TPOT read 4-5 ms in one run and
9-11 ms in the next with no other process on the machine (the host-noise
meter read 0 %), so whichever client drew the slow state twice looked 2x off.
Same requests remove the first; anchoring every run to the engine's
histograms, read from /metrics right before and after it (``_sum``/``_count``
deltas: exact means of that run's requests; no warm-ups, so the counts must
be exactly this run's), removes the second:

* decode: each client's mean TPOT and ITL must equal the engine's mean for
  the same run within DECODE_ABS_MS + DECODE_REL (measured: |diff| <= 0.31 ms
  for both clients over 39 runs) — a client that misses or merges chunks, or
  mis-times them, fails here;
* TTFT and E2E: the client's excess over the engine's figure is what lies
  between the engine's timestamps and the client's (the API server's HTTP
  path, SSE parsing, the client's event loop); it cannot be negative beyond
  NEGATIVE_SLACK_MS (a client does not see a token before the engine made
  it), and per round tunelab's excess minus vLLM's must have a median no
  larger than AGREE_ABS_MS + AGREE_REL of the engine's TTFT (measured on
  the same file: tunelab +2.0 to +7.3 ms TTFT, vLLM +3.4 to +12.6 ms).

Why the clients run on their own core. vLLM CPU's EngineCore process is not
bound to a core and busy-polls (with the worker) while requests run; on a
2-core box it took the one core the API server and the client share, and
both clients' TTFT excess jumped between +3 and +370 ms from run to run (two
CI failures and a local one: one client's decode means off the engine's
because its first tokens came late, or a +24 ms difference of two starved
runs). tests.support.engine_reference.client_cores pins the EngineCore beside
the worker and the API server plus both clients on the other cores for the
rounds (measured then, 12 rounds: tunelab +2.0 to +2.9 ms, vLLM +3.8 to +4.8
ms, every run clean, decode means within 0.07 ms of the engine's), and
restores vLLM's layout afterwards.

Runs where the machine was busy with something else (tuner.bench.host_noise)
or where responses arrived in one chunk (a starved API server: median ITL
under COALESCED_ITL_MS) do not count; rounds go on until ROUNDS clean ones,
at most MAX_ROUNDS. Every run's figures are printed with -s.
tests/test_bench_stub.py pins every client figure against wire timestamps on
a programmed server whatever the load.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.engine_reference import (
    ENGINE_HISTOGRAMS,
    client_cores,
    engine_sums,
    write_shared_prompts,
)
from tests.support.vllm_bench_serve import run_vllm_bench
from tuner.bench import Workload, run_benchmark
from tuner.bench.host_noise import HostNoise, HostNoiseMeter, local_server_pids
from tuner.bench.metrics import SAME_READ_GAP_S

DECODE_ABS_MS = 0.5
DECODE_REL = 0.05
NEGATIVE_SLACK_MS = 1.0
AGREE_ABS_MS = 3.0
AGREE_REL = 0.15
ROUNDS = 4
MAX_ROUNDS = 6
# A median gap under the bench's same-read gap is chunks read together, not
# tokens produced that fast (the same bound as one_chunk_fraction's).
COALESCED_ITL_MS = SAME_READ_GAP_S * 1000.0
PROMPTS = 96
OUTPUT = 32
RATE = 20.0
BURSTINESS = 4.0
DECODE = ("tpot", "itl")
EDGES = ("ttft", "e2el")


def _run_tunelab_bench(args: list[str], cores: Collection[int] | None = None) -> dict:
    """``tunelab bench ... --json`` in a subprocess (on ``cores`` if given); its result dict."""
    proc = subprocess.run(
        [sys.executable, "-m", "tui", *args],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


@dataclass(frozen=True)
class _Run:
    """One client run: its result, the engine's means for it (ms), the host noise."""

    result: dict
    engine: dict[str, float]
    counts: dict[str, float]
    noise: HostNoise | None

    @property
    def clean(self) -> bool:
        """Nothing else took the CPU, and responses arrived token by token."""
        quiet = self.noise is None or not self.noise.contaminated
        return quiet and self.result["median_itl_ms"] >= COALESCED_ITL_MS

    def excess(self, key: str) -> float:
        """The client's mean minus the engine's mean for the same requests (ms)."""
        return self.result[f"mean_{key}_ms"] - self.engine[key]


def _measured(url: str, server: set[int], run: Callable[[], dict]) -> _Run:
    """``run()`` between two reads of the engine's histograms, under the host-noise meter."""
    before = engine_sums(url)
    meter = HostNoiseMeter(server)
    meter.start()
    result = run()
    noise = meter.stop()
    after = engine_sums(url)
    counts = {k: after[k][1] - before[k][1] for k in ENGINE_HISTOGRAMS}
    means = {
        k: 1000.0 * (after[k][0] - before[k][0]) / counts[k] if counts[k] else float("nan")
        for k in ENGINE_HISTOGRAMS
    }
    return _Run(result, means, counts, noise)


def _line(name: str, r: _Run) -> str:
    cells = "  ".join(
        f"{k} {r.result[f'mean_{k}_ms']:6.2f}/{r.engine[k]:6.2f} ({r.excess(k):+6.2f})"
        for k in ENGINE_HISTOGRAMS
    )
    noise = r.noise.describe() if r.noise is not None else "no host reading"
    state = "clean" if r.clean else f"set aside ({noise or 'coalesced'})"
    return f"{name:7} {cells}  median tpot {r.result['median_tpot_ms']:5.2f}  {state}"


@pytest.mark.engine
def test_client_reads_the_engine_clock_as_well_as_vllm_bench_serve(
    cpu_engine, demo_model_path: Path, tmp_path: Path
) -> None:
    url, served = cpu_engine.url, cpu_engine.served_model
    prompts = write_shared_prompts(demo_model_path, tmp_path / "prompts.json", PROMPTS, 128, OUTPUT)
    vllm_args = [
        "--base-url", url, "--model", served, "--tokenizer", str(demo_model_path),
        "--dataset-name", "sharegpt", "--dataset-path", str(prompts),
        "--sharegpt-output-len", str(OUTPUT), "--num-prompts", str(PROMPTS),
        "--max-concurrency", "8", "--request-rate", str(RATE), "--burstiness", str(BURSTINESS),
        "--num-warmups", "0", "--ready-check-timeout-sec", "0", "--ignore-eos",
        "--extra-body", json.dumps({"min_tokens": OUTPUT}), "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
    ]  # fmt: skip
    ours_args = [
        "bench", "--url", url, "--model", served, "--tokenizer", str(demo_model_path),
        "--dataset", str(prompts), "--dataset-kind", "sharegpt",
        "--output-len", str(OUTPUT), "--num-prompts", str(PROMPTS),
        "--concurrency", "8", "--request-rate", str(RATE), "--burstiness", str(BURSTINESS),
        "--warmup", "0", "--json",
    ]  # fmt: skip
    # Prime the engine: its first batches after start are several times slower
    # (allocation, first-shape compilation), which only the first round would pay.
    _run_tunelab_bench(ours_args)
    server = local_server_pids(url)
    assert server, "the engine's listening process was not found: host noise cannot be told"
    rounds: list[tuple[_Run, _Run]] = []
    with client_cores(server) as cores:
        # Not splitting where it could be split would bring the +370 ms runs back.
        assert cores or len(os.sched_getaffinity(0)) < 2, (
            "could not keep the engine off the clients' cores: vLLM's worker process "
            "(VLLM::Worker*) was not found, or it is bound to every core"
        )
        print(f"\nclients and API server on cores {sorted(cores) if cores else 'shared'}")
        for _ in range(MAX_ROUNDS):
            ours = _measured(url, server, lambda: _run_tunelab_bench(ours_args, cores))
            theirs = _measured(url, server, lambda: run_vllm_bench(vllm_args, cores, 300))
            rounds.append((ours, theirs))
            print(f"{_line('tunelab', ours)}\n{_line('vllm', theirs)}")
            if sum(a.clean and b.clean for a, b in rounds) >= ROUNDS:
                break
    failures = _check(rounds)
    assert not failures, "\n".join(failures)


def _check(rounds: list[tuple[_Run, _Run]]) -> list[str]:
    """Every rule of the module docstring over the rounds; the broken ones."""
    failures = []
    runs = [r for pair in rounds for r in pair]
    # Same result keys as vLLM's (its per-request lists aside), so tools read both.
    theirs0 = rounds[0][1].result
    vllm_keys = {k for k, v in theirs0.items() if not isinstance(v, list)} - {"client_cpu_s"}
    missing = vllm_keys - set(rounds[0][0].result)  # client_cpu_s: our harness's, not vLLM's
    if missing:
        failures.append(f"result keys vLLM has and tunelab lacks: {sorted(missing)}")
    for r in runs:
        res = r.result
        if (
            res["completed"] != PROMPTS
            or res["failed"]
            or res["total_output_tokens"] != PROMPTS * OUTPUT
        ):
            failures.append(f"a run did not complete every request: {res['completed']}/{PROMPTS}")
        # The engine saw exactly this run's requests: its means are this run's.
        if r.counts["ttft"] != PROMPTS or r.counts["itl"] != PROMPTS * (OUTPUT - 1):
            failures.append(f"the engine counted {r.counts} requests/gaps, not this run's")
    clean = [(a, b) for a, b in rounds if a.clean and b.clean] or rounds
    for who, side in (("tunelab", 0), ("vllm", 1)):
        for pair in clean:
            r = pair[side]
            for key in DECODE:
                if abs(r.excess(key)) > DECODE_ABS_MS + DECODE_REL * r.engine[key]:
                    failures.append(f"{who} mean {key} {r.result[f'mean_{key}_ms']:.2f} ms vs "
                                    f"the engine's {r.engine[key]:.2f} ms")  # fmt: skip
            for key in EDGES:
                if r.excess(key) < -NEGATIVE_SLACK_MS:
                    failures.append(f"{who} saw {key} {-r.excess(key):.2f} ms before the engine")
    for key in EDGES:
        diffs = [a.excess(key) - b.excess(key) for a, b in clean]
        diff = statistics.median(diffs)
        # Both edges carry the same overhead (the first and the last chunk's path),
        # so both are held to the engine's TTFT scale, not E2E's ten times larger one.
        allowed = AGREE_ABS_MS + AGREE_REL * statistics.median(a.engine["ttft"] for a, _ in clean)
        print(f"{key}: tunelab's overhead minus vLLM's, per round: "
              + " ".join(f"{d:+.2f}" for d in diffs) + f" ms; median {diff:+.2f} (<= {allowed:.2f})")  # fmt: skip
        if diff > allowed:
            failures.append(f"tunelab's {key} overhead exceeds vLLM's by {diff:+.2f} ms (median "
                            f"over {len(clean)} rounds; allowed {allowed:.2f} ms)")  # fmt: skip
    return failures


@pytest.mark.engine
def test_server_view_sees_the_load_on_the_real_engine(cpu_engine, demo_model_path: Path) -> None:
    """Issue 19 "Then" 5: concurrency 8 once showed peak running 0, KV 0 %.

    The scrape must use vLLM 0.32's names (vllm/v1/metrics/loggers.py) and be
    taken while requests are in flight; then the engine's own gauges show the
    requests tunelab had open.
    """
    # Long enough (~3x the first version) that a starved 2-core runner still gets
    # several scrapes in while requests run: a 1-2 s run once saw none busy.
    wl = Workload(input_len=32, output_len=96, num_prompts=48, concurrency=8)
    res = asyncio.run(
        run_benchmark(
            cpu_engine.url,
            cpu_engine.served_model,
            wl,
            tokenizer_path=str(demo_model_path),
            metrics_interval_s=0.2,
        )
    )
    srv = res.server
    print(f"\nserver view: {srv.to_dict()}")
    assert res.metrics["completed"] == 48
    assert srv.available and srv.busy_samples >= 1
    assert srv.peak_running_requests is not None and srv.peak_running_requests >= 1
    assert srv.peak_kv_cache_usage is not None and srv.peak_kv_cache_usage > 0
    # The engine's own inter-token latency (vLLM 0.32's inter_token_latency_seconds
    # histogram): a decode step of a tiny model, not the stream's chunking.
    assert srv.mean_itl_ms is not None and 0.1 < srv.mean_itl_ms < 1000
