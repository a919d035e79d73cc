"""What tunelab's client and `vllm bench serve` are both checked against: the engine itself.

Used by tests/test_bench_engine.py and benchmarks/client_agreement.py: one
prompt file both clients read (so they send the same requests), and the
engine's own latency histograms (vLLM 0.32, vllm/v1/metrics/loggers.py),
whose ``_sum``/``_count`` deltas around a run are the exact means of that
run's requests.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from tuner.bench import Workload
from tuner.bench.prompts import pool_from_tokenizer, random_prompts
from tuner.bench.server_metrics import parse_prometheus

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
