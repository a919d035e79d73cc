"""A torch-profiler trace of one engine worker, summed into kernel families (issue 29).

vLLM writes one Chrome-trace JSON per worker (``rank0.<id>.pt.trace.json.gz``
under ``--profiler-config``'s ``torch_profiler_dir``) between ``/start_profile``
and ``/stop_profile``. This module reads one (gzipped or not, with a size
bound: a trace is data from a process, not from a person, but it can be large)
into a :class:`TraceProfile`: the seconds each family took between the first
and the last engine step, the number of steps and of output tokens, so two arms
can be set side by side per output token and per step
(:mod:`tuner.profiles.explain`).

What counts where:

- on a GPU (the trace has ``kernel`` events): each kernel's duration goes to
  its family; the window's time with no kernel running is ``gaps`` (the GPU
  idle: host work, scheduling, waiting);
- on the CPU engine (ops only): each op's *self* time on the worker's main
  thread (its duration less its children's) goes to its family; Inductor's
  compiled code (``## Call CompiledFxGraph``: the fused norms and activations)
  is ``norm_act``; the step annotations' own self time and Python frames are
  ``host``; the window's time outside any step is ``gaps``.

Steps are vLLM's per-step annotations ``execute_context_C(c)_generation_G(g)``
(C requests in prefill with c tokens, G in decode): each request of a step is
counted as one output token, which overcounts a chunked prefill's partial
chunks slightly and is exact for decode.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import TunelabError
from tuner.profiles.families import FAMILIES, GAPS, HOST, NORM_ACT, Platform, family_of

# A worker trace of a short window is megabytes; refuse what would not fit in memory.
MAX_TRACE_BYTES = 512 * 1024 * 1024
_STEP = re.compile(r"execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
# CPU-side names that are the host's own work, not an op's.
_HOST_NAMES = re.compile(r"Pregraph bytecode|Torch-Compiled Region|^ProfilerStep")
# On the CPU engine Inductor's generated code runs inside "## Call CompiledFxGraph ... ##":
# the fused elementwise work (norms, activations, residual adds) between the extern
# GEMM and attention ops, which show as their own ops.
_COMPILED = re.compile(r"^## Call CompiledFxGraph")
_HOST_CATS = {"python_function", "user_annotation"}


class TraceError(TunelabError):
    """A trace file that cannot be read as a torch-profiler trace."""


@dataclass(frozen=True)
class TraceProfile:
    """Where one worker's time went over a profiled window.

    Attributes:
        platform: ``cpu``, ``rocm`` or ``cuda`` (which pattern table named the ops).
        window_s: From the first step's start to the last step's end.
        steps: Engine steps in the window.
        tokens: Output tokens in the window (requests per step, summed).
        family_s: Seconds per family (:data:`tuner.profiles.families.FAMILIES`).
        top: The largest ops or kernels per family, ``[name, seconds]``, for the report.
    """

    platform: str
    window_s: float
    steps: int
    tokens: int
    family_s: dict[str, float]
    top: dict[str, list[list[Any]]] = field(default_factory=dict)

    def per_token_ms(self, family: str) -> float | None:
        """Milliseconds of ``family`` per output token (None without tokens)."""
        return 1e3 * self.family_s.get(family, 0.0) / self.tokens if self.tokens else None

    def per_step_ms(self, family: str) -> float | None:
        return 1e3 * self.family_s.get(family, 0.0) / self.steps if self.steps else None

    @property
    def ms_per_token(self) -> float | None:
        """The window's milliseconds per output token: every family together."""
        return 1e3 * self.window_s / self.tokens if self.tokens else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "window_s": self.window_s,
            "steps": self.steps,
            "tokens": self.tokens,
            "family_s": dict(self.family_s),
            "top": self.top,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceProfile:
        return cls(
            platform=str(data["platform"]),
            window_s=float(data["window_s"]),
            steps=int(data["steps"]),
            tokens=int(data["tokens"]),
            family_s={str(k): float(v) for k, v in dict(data["family_s"]).items()},
            top=dict(data.get("top") or {}),
        )


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """The complete (``"ph": "X"``) events of a Chrome trace, gzipped or not.

    Raises:
        TraceError: not readable, too large, or not a Chrome trace.
    """
    path = Path(path)
    try:
        with path.open("rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        opener = gzip.open if gz else open
        with opener(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise TraceError(f"cannot read the trace {path}: {exc}") from None
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(
            f"the trace {path} is over {MAX_TRACE_BYTES >> 20} MiB: profile a shorter window"
        )
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{path} is not JSON: {exc}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{path} has no traceEvents: not a Chrome trace")
    return [
        e
        for e in events
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and isinstance(e.get("ts"), int | float)
        and isinstance(e.get("dur"), int | float)
        and isinstance(e.get("name"), str)
    ]


def summarise(events: list[dict[str, Any]], platform: Platform) -> TraceProfile:
    """The families of one worker's events over its steps' window.

    Raises:
        TraceError: no engine step in the trace (nothing ran while it recorded).
    """
    steps = [e for e in events if e.get("cat") == "user_annotation" and _STEP.search(e["name"])]
    if not steps:
        raise TraceError(
            "the trace holds no engine step (execute_context_... annotation): the profiled "
            "window saw no request"
        )
    start = min(e["ts"] for e in steps)
    end = max(e["ts"] + e["dur"] for e in steps)
    window_us = end - start
    tokens = sum(int(m[1]) + int(m[3]) for e in steps if (m := _STEP.search(e["name"])))
    kernels = [e for e in events if e.get("cat") == "kernel" and start <= e["ts"] <= end]
    family_us: Counter[str] = Counter()
    top: dict[str, Counter[str]] = {}
    if kernels:
        for e in kernels:
            family = family_of(e["name"], platform)
            family_us[family] += e["dur"]
            top.setdefault(family, Counter())[e["name"]] += e["dur"]
        family_us[GAPS] += max(0.0, window_us - _busy(kernels))
    else:
        _cpu_self_times(events, steps, start, end, family_us, top, platform)
        family_us[GAPS] += max(0.0, window_us - _busy(steps))
    return TraceProfile(
        platform=platform,
        window_s=window_us / 1e6,
        steps=len(steps),
        tokens=tokens,
        family_s={f: family_us.get(f, 0.0) / 1e6 for f in FAMILIES},
        top={
            f: [[name, us / 1e6] for name, us in names.most_common(3)] for f, names in top.items()
        },
    )


def _busy(events: list[dict[str, Any]]) -> float:
    """Microseconds covered by at least one of ``events`` (overlaps counted once)."""
    busy = 0.0
    reach = float("-inf")
    for e in sorted(events, key=lambda e: e["ts"]):
        lo, hi = max(e["ts"], reach), e["ts"] + e["dur"]
        if hi > lo:
            busy += hi - lo
        reach = max(reach, hi)
    return busy


def _cpu_self_times(
    events: list[dict[str, Any]],
    steps: list[dict[str, Any]],
    start: float,
    end: float,
    family_us: Counter[str],
    top: dict[str, Counter[str]],
    platform: Platform,
) -> None:
    """Each event's self time on the steps' thread, inside the window, into its family."""
    thread = Counter((e.get("pid"), e.get("tid")) for e in steps).most_common(1)[0][0]
    mine = [
        e
        for e in events
        if (e.get("pid"), e.get("tid")) == thread and start <= e["ts"] and e["ts"] + e["dur"] <= end
    ]
    mine.sort(key=lambda e: (e["ts"], -e["dur"]))
    child_us: dict[int, float] = {}
    stack: list[int] = []
    for i, e in enumerate(mine):
        while stack and mine[stack[-1]]["ts"] + mine[stack[-1]]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            child_us[stack[-1]] = child_us.get(stack[-1], 0.0) + e["dur"]
        stack.append(i)
    for i, e in enumerate(mine):
        own = max(0.0, e["dur"] - child_us.get(i, 0.0))
        host = e.get("cat") in _HOST_CATS or _HOST_NAMES.search(e["name"]) is not None
        if _COMPILED.search(e["name"]):
            host, family = False, NORM_ACT
        else:
            family = HOST if host else family_of(e["name"], platform)
        family_us[family] += own
        if not host:
            top.setdefault(family, Counter())[e["name"]] += own


def worker_trace(path: str | Path) -> Path:
    """The trace to read for ``path``: the file itself, or in a ``torch_profiler_dir`` the
    newest worker trace of rank 0 (``rank0.*.pt.trace.json[.gz]``; the API server's own
    ``*.async_llm.*`` trace holds no engine step).

    Raises:
        TraceError: a folder with no rank-0 worker trace.
    """
    path = Path(path)
    if not path.is_dir():
        return path
    found = [p for p in path.glob("rank0.*.pt.trace.json*") if p.is_file()]
    if not found:
        raise TraceError(
            f"{path} holds no rank0.*.pt.trace.json[.gz]: give the folder vLLM's "
            "--profiler-config torch_profiler_dir wrote, or a worker trace file"
        )
    return max(found, key=lambda p: p.stat().st_mtime)


def profile_of(path: str | Path, platform: Platform) -> TraceProfile:
    """:func:`summarise` of the trace at ``path`` (a file, or a profiler folder)."""
    return summarise(load_events(worker_trace(path)), platform)
