"""A profile of a trial's engine, taken on the same launch after its measured run (issue 29).

An A/B that says *that* B is faster is followed by "why?". The answer needs a
trace of each arm at the workload's load, and a trace must never touch the
measured run: the profiler slows every op it records. So a profiled trial's
engine is launched with vLLM's torch profiler armed but idle (``--profiler-config``
since vLLM 0.13, ``VLLM_TORCH_PROFILER_DIR`` before; an armed profiler records
nothing until ``/start_profile``), its measured run and output-drift guard run
as always, and only then does :func:`capture` call ``/start_profile``, send a
short window of the same workload (one wave at its concurrency, no warm-up:
the engine is warm), call ``/stop_profile`` and read the worker's trace into a
:class:`~tuner.profiles.trace.TraceProfile`. No extra launch, and a failure
here never fails the trial: the record then says why.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path

from tuner.bench.control import ControlClient, ControlError
from tuner.bench.own_loop import run_in_own_loop
from tuner.bench.runner import run_benchmark
from tuner.bench.workload import Workload
from tuner.knobs.versions import parse_version
from tuner.profiles.record import ProfileRecord
from tuner.profiles.trace import TraceError, profile_of

# The window: one wave at the workload's concurrency, at most this many requests
# (a trace grows with every op of every step; 64 requests keep it to megabytes).
MAX_WINDOW_REQUESTS = 64
# vLLM writes the trace when /stop_profile is handled (1-2 s on the CPU engine);
# a GPU node's trace of a large model takes longer to gzip.
TRACE_WAIT_S = 180.0
PLATFORMS = ("cpu", "rocm", "cuda")
# --profiler-config arrived in vLLM 0.13 (vllm#29912); the variables date from 0.6
# (vllm#7451) and were removed in 0.16 (vllm#33536).
FLAG_SINCE = (0, 13)
ENV_SINCE = (0, 6)


def _version(text: str | None) -> tuple[int, ...] | None:
    """The release numbers (tuner.knobs.versions, the catalogue's one comparison), or None."""
    try:
        return parse_version(text) if text else None
    except ValueError:
        return None


def launch_options(trace_dir: Path, vllm_version: str | None) -> tuple[list[str], dict[str, str]]:
    """The engine arguments and variables that arm vLLM's torch profiler into ``trace_dir``.

    An unknown version gets the flag (every current release has it).

    Raises:
        TraceError: A vLLM older than 0.6, which has no profiler endpoint.
    """
    version = _version(vllm_version)
    if version is None or version >= FLAG_SINCE:
        config = {
            "profiler": "torch",
            "torch_profiler_dir": str(trace_dir),
            "torch_profiler_with_stack": False,
        }
        return [f"--profiler-config={json.dumps(config, separators=(',', ':'))}"], {}
    if version >= ENV_SINCE:
        return [], {
            "VLLM_TORCH_PROFILER_DIR": str(trace_dir),
            "VLLM_TORCH_PROFILER_WITH_STACK": "0",
        }
    raise TraceError(
        f"vLLM {vllm_version} has no /start_profile (it arrived in 0.6): "
        "profile on a newer vLLM, or run `vllm bench serve --profile` by hand"
    )


def window_workload(workload: Workload) -> Workload:
    """The profiled window: the workload's shape and load, one wave of it, no warm-up."""
    wave = workload.concurrency or MAX_WINDOW_REQUESTS
    n = max(1, min(workload.num_prompts, wave, MAX_WINDOW_REQUESTS))
    return replace(workload, num_prompts=n, warmup_requests=0, duration_s=None, slo={})


def _traces(folder: Path) -> dict[Path, int]:
    """The worker traces in ``folder`` and their sizes (the API server's own trace excluded)."""
    if not folder.is_dir():
        return {}
    return {
        p: p.stat().st_size
        for p in folder.glob("*.pt.trace.json*")
        if p.is_file() and "async_llm" not in p.name
    }


async def _new_trace(folder: Path, before: set[Path], wait_s: float) -> Path:
    """The worker trace written since ``before`` (rank 0 first), once its size holds still.

    Raises:
        TraceError: None appeared within ``wait_s``.
    """
    deadline = time.monotonic() + wait_s
    sizes: dict[Path, int] = {}
    while time.monotonic() < deadline:
        new = {p: n for p, n in _traces(folder).items() if p not in before}
        settled = [p for p, n in new.items() if n > 0 and sizes.get(p) == n]
        if settled:
            return min(settled, key=lambda p: (not p.name.startswith("rank0."), -p.stat().st_mtime))
        sizes = new
        await asyncio.sleep(0.5)
    raise TraceError(f"vLLM wrote no worker trace into {folder} within {wait_s:.0f} s")


async def _post(client: ControlClient, path: str, timeout_s: float) -> None:
    answer = await client.request("POST", path, timeout_s=timeout_s)
    if answer.status != 200:
        raise ControlError(
            f"POST {path} answered HTTP {answer.status}: the engine was not started with "
            "the profiler armed"
        )


async def capture(
    url: str,
    model: str,
    workload: Workload,
    trace_dir: Path,
    platform: str | None,
    measured_ended_at: float | None,
) -> ProfileRecord:
    """Profile one window of ``workload`` on the warm engine at ``url``; never raises.

    Args:
        url: The engine's base URL (its profiler armed into ``trace_dir``).
        model: The served model name.
        workload: The trial's workload; the window is :func:`window_workload` of it.
        trace_dir: Where the engine writes traces.
        platform: Whose kernel-name table reads the trace (cpu, rocm, cuda).
        measured_ended_at: When the measured run ended (kept with the record).
    """
    window = window_workload(workload)
    base = ProfileRecord(
        requests=window.num_prompts,
        concurrency=window.concurrency,
        measured_ended_at=measured_ended_at,
    )
    if platform not in PLATFORMS:
        return replace(base, error=f"no kernel-family table for the platform {platform!r}")
    before = set(_traces(trace_dir))
    client = ControlClient(url, read_timeout_s=TRACE_WAIT_S)
    try:
        await _post(client, "/start_profile", 120.0)
        started = time.time()
        try:
            await run_in_own_loop(lambda: run_benchmark(url, model, window), name="profile")
        finally:
            await _post(client, "/stop_profile", TRACE_WAIT_S)
        ended = time.time()
        path = await _new_trace(trace_dir, before, TRACE_WAIT_S)
        summary = await asyncio.to_thread(profile_of, path, platform)  # type: ignore[arg-type]
    except (ControlError, TraceError) as exc:
        return replace(base, error=str(exc))
    except Exception as exc:  # the window's benchmark: its failure is the profile's only
        return replace(base, error=f"the profiled window failed: {type(exc).__name__}: {exc}")
    finally:
        await client.aclose()
    return replace(base, trace=str(path), started_at=started, ended_at=ended, summary=summary)
