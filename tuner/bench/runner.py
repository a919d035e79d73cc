"""One benchmark run end to end: resolve, warm up, send on schedule, measure.

``run_benchmark`` is the single entry point the CLI, the TUI and the trial
code call. It asks the server for its model when none is given, builds the
prompts (seeded), sends the warm-ups and waits for them, then releases the
counted requests on their schedule — gamma-distributed arrivals at
``request_rate`` as in `vllm bench serve` (including its rescaling of the
arrival times to exactly num_prompts / rate), capped at ``concurrency``
requests in flight — while a watcher scrapes the server's /metrics and a
reporter emits throttled progress. Every request carries its own timeouts, so
a run always ends. The result uses vLLM's key names plus a ``tunelab`` block.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from tuner.bench.client import BenchClient, LiveCounters, RequestRecord, Transport, cancel_all
from tuner.bench.metrics import compute_metrics, one_chunk_fraction, summarize_failures
from tuner.bench.progress import ProgressCallback, ProgressReporter
from tuner.bench.prompts import (
    Prompt,
    TokenPool,
    filler_text,
    pool_from_server_tokens,
    pool_from_tokenizer,
    random_prompts,
    sharegpt_prompts,
    tokenizer_file,
)
from tuner.bench.server_metrics import ServerSummary, ServerWatcher
from tuner.bench.workload import Workload, WorkloadError


class BenchError(RuntimeError):
    """The run could not start (server unreachable, no model); says what to fix."""


@dataclass
class BenchResult:
    """A finished run.

    Attributes:
        url: Server base URL.
        model: Model name sent in requests.
        workload: What was sent.
        metrics: vLLM-compatible metric block (see metrics.compute_metrics).
        server: The server-side summary from /metrics.
        records: Every counted request (warm-ups excluded).
        started_at: UTC time the measured part began (ISO 8601).
        prompt_source: Where prompt tokens came from.
    """

    url: str
    model: str
    workload: Workload
    metrics: dict[str, Any]
    server: ServerSummary
    records: list[RequestRecord] = field(repr=False, default_factory=list)
    started_at: str = ""
    prompt_source: str = ""

    def __getitem__(self, key: str) -> Any:
        return self.metrics[key]

    def to_dict(self, detailed: bool = False) -> dict[str, Any]:
        """The result JSON: `vllm bench serve` keys, then tunelab's own block.

        Args:
            detailed: Include per-request lists (like vLLM's --save-detailed).
        """
        wl = self.workload
        failures = summarize_failures(self.records)
        head: dict[str, Any] = {
            "date": self.started_at,
            "endpoint_type": "openai" if wl.endpoint == "completions" else "openai-chat",
            "backend": "openai" if wl.endpoint == "completions" else "openai-chat",
            "label": "tunelab",
            "model_id": self.model,
            "tokenizer_id": self.prompt_source,
            "num_prompts": len(self.records),
            "request_rate": "inf" if math.isinf(wl.request_rate) else wl.request_rate,
            "burstiness": wl.burstiness,
            "max_concurrency": wl.concurrency,
        }
        body = (
            self.metrics
            if detailed
            else {
                k: v
                for k, v in self.metrics.items()
                if k
                not in (
                    "input_lens",
                    "output_lens",
                    "ttfts",
                    "itls",
                    "latencies",
                    "start_times",
                    "errors",
                )
            }
        )
        ok = [r for r in self.records if r.success]
        queue = [r.queue_time for r in ok]
        extra = {
            "url": self.url,
            "workload": wl.to_dict(),
            "warmup_requests": wl.warmup_requests,
            "failures": failures.counts,
            "failure_examples": failures.examples,
            "server": self.server.to_dict(),
            "mean_queue_time_ms": (sum(queue) / len(queue) * 1000.0) if queue else 0.0,
            "one_chunk_fraction": one_chunk_fraction(self.records),
            "chunks_per_output_token": (
                sum(len(r.chunk_times) for r in ok) / max(1, self.metrics["total_output_tokens"])
            ),
        }
        return {**head, **body, "tunelab": extra}


async def resolve_model(client: BenchClient) -> tuple[str, str | None]:
    """The first model the server serves, and its ``root`` (local path, if any)."""
    try:
        data = await client.get_json("/v1/models")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise BenchError(
            f"cannot reach {client.base_url}/v1/models ({exc}); is the server running "
            "and the URL right (e.g. http://127.0.0.1:8000)?"
        ) from None
    models = data.get("data") if isinstance(data, dict) else None
    if not models:
        raise BenchError(f"{client.base_url}/v1/models lists no model; pass --model NAME")
    first = models[0]
    return str(first.get("id")), first.get("root")


async def _token_pool(
    client: BenchClient, tokenizer_path: str | None, root: str | None
) -> TokenPool:
    """Local tokenizer if given or found at the model's root, else the server's /tokenize."""
    if tokenizer_path:
        return pool_from_tokenizer(tokenizer_path)
    if root and Path(root).is_dir() and tokenizer_file(root):
        return pool_from_tokenizer(root)
    try:
        data = await client.post_json(
            "/tokenize",
            {"model": client.model, "prompt": filler_text(), "add_special_tokens": False},
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise BenchError(
            f"no local tokenizer and the server's /tokenize failed ({exc}); "
            "pass --tokenizer PATH (a tokenizer.json or the model directory)"
        ) from None
    return pool_from_server_tokens(list(data.get("tokens", [])), None)


def arrival_offsets(workload: Workload, count: int) -> list[float]:
    """Seconds after the start at which each counted request is released.

    Gamma inter-arrival gaps (shape = burstiness, mean = 1 / rate), rescaled so
    the last arrival lands at count / rate exactly — vLLM's get_request logic,
    seeded with the workload's seed.
    """
    rate = workload.request_rate
    if math.isinf(rate):
        return [0.0] * count
    rng = random.Random(workload.seed * 7919 + 17)
    shape = workload.burstiness
    theta = 1.0 / (rate * shape)
    t, out = 0.0, []
    for _ in range(count):
        t += rng.gammavariate(shape, theta)
        out.append(t)
    if out[-1] > 0:
        scale = (count / rate) / out[-1]
        out = [x * scale for x in out]
    return out


def _open_arrivals(workload: Workload) -> Iterator[float]:
    """Endless arrival offsets for duration-bound runs (no rescaling)."""
    rng = random.Random(workload.seed * 7919 + 17)
    rate, shape = workload.request_rate, workload.burstiness
    t = 0.0
    while True:
        if not math.isinf(rate):
            t += rng.gammavariate(shape, 1.0 / (rate * shape))
        yield t


async def _warmup(client: BenchClient, prompts: list[Prompt], concurrency: int | None) -> None:
    sem = asyncio.Semaphore(concurrency or len(prompts))
    live = LiveCounters()

    async def one(p: Prompt) -> None:
        async with sem:
            await client.send(p, live)

    await asyncio.gather(*(one(p) for p in prompts))


async def run_benchmark(
    url: str,
    model: str | None,
    workload: Workload,
    *,
    on_progress: ProgressCallback | None = None,
    tokenizer_path: str | None = None,
    metrics_interval_s: float = 1.0,
    transport: Transport = "lean",
) -> BenchResult:
    """Benchmark the OpenAI-compatible server at ``url`` with ``workload``.

    Args:
        url: Base URL, e.g. ``http://127.0.0.1:8000``.
        model: Model name for requests; None asks the server's /v1/models.
        workload: What to send.
        on_progress: Called with BenchProgress at most ~10 times a second.
        tokenizer_path: tokenizer.json or model dir for exact random prompts;
            default: the model's root dir if local, else the server's /tokenize.
        metrics_interval_s: Seconds between /metrics scrapes during the run.
        transport: "lean" (tuner.bench.http) or "aiohttp" for the streams.

    Returns:
        The BenchResult (failed requests are counted in it, not raised).

    Raises:
        BenchError: The server is unreachable or serves no model.
        WorkloadError: The workload or its dataset is unusable.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchError(
            f"the server URL {url!r} is not an http(s) URL: write it as http://HOST:PORT, "
            "for example http://127.0.0.1:8000"
        )
    if (
        workload.duration_s is not None
        and math.isinf(workload.request_rate)
        and not workload.concurrency
    ):
        raise WorkloadError(
            "a duration-bound run needs --concurrency or a finite --request-rate, "
            "else it would open requests without limit"
        )
    async with BenchClient(
        url,
        model or "",
        workload.endpoint,
        concurrency=workload.concurrency,
        request_timeout_s=workload.request_timeout_s,
        stall_timeout_s=workload.stall_timeout_s,
        transport=transport,
    ) as client:
        root = None
        if not model:
            client.model, root = await resolve_model(client)
        if workload.dataset_path:
            prompts = sharegpt_prompts(workload, workload.num_prompts)
            warm = sharegpt_prompts(workload, workload.warmup_requests, salt=1)
            source = workload.dataset_path
        else:
            pool = await _token_pool(client, tokenizer_path, root)
            prompts = random_prompts(workload, pool, workload.num_prompts)
            warm = random_prompts(workload, pool, workload.warmup_requests, salt=1)
            source = pool.source
        bodies = [client.body(p) for p in prompts]
        if warm:
            await _warmup(client, warm, workload.concurrency)

        live = LiveCounters()
        total = None if workload.duration_s is not None else len(prompts)
        reporter = ProgressReporter(on_progress, live, total)
        watcher = ServerWatcher(lambda: client.get_text("/metrics"), metrics_interval_s)
        await watcher.start()
        sem = asyncio.Semaphore(workload.concurrency) if workload.concurrency else None
        records: list[RequestRecord] = []
        tasks: list[asyncio.Task[RequestRecord]] = []

        async def one(i: int, arrival: float, held: bool) -> RequestRecord:
            p = prompts[i % len(prompts)]
            try:
                if sem is not None and not held:
                    async with sem:
                        rec = await client.send(p, live, bodies[i % len(prompts)], arrival)
                else:
                    rec = await client.send(p, live, bodies[i % len(prompts)], arrival)
            finally:
                if held and sem is not None:
                    sem.release()
            reporter.record_done(rec)
            return rec

        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        reporter.start()
        t0 = perf_counter()
        try:
            if workload.duration_s is None:
                offsets = arrival_offsets(workload, len(prompts))
                for i, off in enumerate(offsets):
                    wait = t0 + off - perf_counter()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    tasks.append(asyncio.create_task(one(i, perf_counter(), False)))
            else:
                closed_loop = math.isinf(workload.request_rate)
                end = t0 + workload.duration_s
                for i, off in enumerate(_open_arrivals(workload)):
                    wait = t0 + off - perf_counter()
                    if wait > 0:
                        await asyncio.sleep(min(wait, max(0.0, end - perf_counter())))
                    if closed_loop and sem is not None:
                        await sem.acquire()
                    if perf_counter() >= end:
                        if closed_loop and sem is not None:
                            sem.release()
                        break
                    tasks.append(asyncio.create_task(one(i, perf_counter(), closed_loop)))
            records = list(await asyncio.gather(*tasks))
        except BaseException:
            await cancel_all(tasks)
            await watcher.stop()
            raise
        duration = perf_counter() - t0
        await reporter.stop()
        server = await watcher.stop()

    return BenchResult(
        url=url,
        model=client.model,
        workload=workload,
        metrics=compute_metrics(records, duration, workload.slo, detailed=True),
        server=server,
        records=records,
        started_at=started_at,
        prompt_source=source,
    )
