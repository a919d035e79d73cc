"""The shapes a stored trial's fields must have before any reader sees them (issue 26).

A trial keeps its nested parts (results, the server's view, telemetry, the
effective config, the environment, tags, timings ...) as the JSON dicts their
producers emit, and its scalars as SQLite columns. Every reader — the results
table, ``show``, the report, ``winner``, the A/B replay, ``export``, the TUI —
reads known keys and does arithmetic on them. A hand-edited, corrupted or
hostile row with a string where a number belongs, a list where an object
belongs or a number too large for a float made every one of those commands
crash. :func:`check_trial` is the one gate where stored data becomes a
:class:`~tuner.trials.model.Trial` (``Trial.from_dict``, which both the store
and the study-event decoder go through): each *known* key must have the type
its producer writes; keys a newer tunelab adds pass untouched. A value that
does not fit raises :class:`ShapeError` naming where it is
(``results.output_throughput is 'abc', not a number``); the store then shows
that row as unreadable, by id, and lists the others.

NaN and infinities stay allowed where a producer can write them (a zero
duration gives a NaN throughput); every reader already treats them as "no
value" (:func:`tuner.trials.model.metric`). Whole numbers are bounded to 64
bits: a 4000-digit integer parses as JSON but overflows every float
conversion a reader makes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import is_dataclass
from typing import Any

from tuner import bounded
from tuner.errors import TunelabError

Check = Callable[[Any, str], None]

# The largest whole number a stored field may hold: SQLite's integers stop there, and
# no count, byte size or id tunelab writes comes near it.
MAX_INT = 2**63 - 1
# Process ids (Linux pid_max is at most 2**22): recovery hands them to psutil.
MAX_PID = 2**31 - 1
# No rate, latency, count, byte size or energy tunelab measures comes near 1e15 (a
# petabyte, 30 years in ms); a larger finite value is corruption that breaks the
# statistics and plots over it (tuner.trials.model.measured).
MAX_MEASURED = 1e15


_ABSENT = object()


class ShapeError(TunelabError, ValueError):
    """A stored value does not have the type its field needs (the message names the field)."""


def _what(value: Any) -> str:
    """A short, safe description of ``value`` for a message (never the whole value)."""
    if isinstance(value, str):
        return repr(value[:40] + ("..." if len(value) > 40 else ""))
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return "an integer over 64 bits" if abs(value) > MAX_INT else repr(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return "binary data"
    return "a JSON array" if isinstance(value, list) else "a JSON object"


def _fail(path: str, value: Any, expected: str) -> ShapeError:
    return ShapeError(f"{path} is {_what(value)}, not {expected}")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= MAX_INT
    return isinstance(value, float)


# -- leaves ---------------------------------------------------------------------------
def num(*, null: bool = True, finite: bool = False, most: float | None = None) -> Check:
    """A number (not a bool; a whole number within 64 bits).

    ``finite``: no NaN or infinity; ``most``: a finite value's magnitude is at most this.
    """

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not _is_number(value) or (finite and not math.isfinite(value)):
            raise _fail(path, value, "a finite number" if finite else "a number")
        if most is not None and math.isfinite(value) and abs(value) > most:
            raise _fail(path, value, f"a measured value (at most {most:g})")

    return check


def integer(*, null: bool = True, lo: int = -MAX_INT, hi: int = MAX_INT) -> Check:
    """A whole number (an int in JSON, not a bool) within ``lo..hi``."""

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise _fail(path, value, f"a whole number from {lo} to {hi}")

    return check


def text(*, null: bool = True) -> Check:
    """A string."""

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not isinstance(value, str):
            raise _fail(path, value, "text")

    return check


def flag(*, null: bool = True) -> Check:
    """A JSON boolean."""

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not isinstance(value, bool):
            raise _fail(path, value, "true or false")

    return check


def scalar(*, null: bool = True) -> Check:
    """Text, a number or a boolean (what ``str()`` of a knob value may print)."""

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not (isinstance(value, str | bool) or _is_number(value)):
            raise _fail(path, value, "text, a number or a boolean")

    return check


def anything(value: Any, path: str) -> None:
    """Any JSON value whose whole numbers fit 64 bits (its depth is bounded by the parser)."""
    if isinstance(value, dict):
        for key, item in value.items():
            anything(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            anything(item, f"{path}[{i}]")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise _fail(path, value, "a number within 64 bits")


def either(*checks: Check, expected: str) -> Check:
    """The first of ``checks`` that accepts the value."""

    def check(value: Any, path: str) -> None:
        deeper: list[ShapeError] = []
        for one in checks:
            try:
                one(value, path)
            except ShapeError as exc:
                if not str(exc).startswith(f"{path} is "):
                    deeper.append(exc)  # the shape fit; a part inside it did not
                continue
            return
        raise deeper[0] if deeper else _fail(path, value, expected)

    return check


# -- containers -----------------------------------------------------------------------
def list_of(item: Check, *, null: bool = False) -> Check:
    """A JSON array whose every item passes ``item``."""

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not isinstance(value, list):
            raise _fail(path, value, "a list")
        for i, one in enumerate(value):
            item(one, f"{path}[{i}]")

    return check


def tuple_of(*items: Check) -> Check:
    """A JSON array of exactly ``len(items)`` values, each passing its check."""

    def check(value: Any, path: str) -> None:
        if not isinstance(value, list) or len(value) != len(items):
            raise _fail(path, value, f"a list of {len(items)}")
        for i, (one, item) in enumerate(zip(value, items, strict=True)):
            item(one, f"{path}[{i}]")

    return check


def map_of(item: Check, *, null: bool = False) -> Check:
    """A JSON object whose every value passes ``item`` (keys are any text)."""

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not isinstance(value, dict):
            raise _fail(path, value, "an object")
        for key, one in value.items():
            item(one, f"{path}.{key}")

    return check


def obj(
    fields: Mapping[str, Check],
    *,
    null: bool = True,
    required: tuple[str, ...] = (),
    patterns: tuple[tuple[re.Pattern[str], Check], ...] = (),
) -> Check:
    """A JSON object: known ``fields`` (and keys matching ``patterns``) checked, others free.

    Keys a newer tunelab adds pass (an older one reads what it knows), but only
    as JSON whose numbers fit 64 bits.
    """

    def check(value: Any, path: str) -> None:
        if value is None and null:
            return
        if not isinstance(value, dict):
            raise _fail(path, value, "an object")
        for key in required:
            if key not in value:
                raise ShapeError(f"{path} lacks {key!r}")
        for key, item in value.items():
            where = f"{path}.{key}"
            one = fields.get(key) or next((c for rx, c in patterns if rx.fullmatch(key)), None)
            (one or anything)(item, where)

    return check


# -- the stored trial -------------------------------------------------------------------
_NUM = num()
_COUNT = integer(lo=0)
_DIRT = map_of(integer(null=False, lo=0), null=True)  # reason -> samples it spoiled
_TEXT = text()
_FLAG = flag()
_LATENCY_KEY = re.compile(r"(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms")

# tuner.bench.server_metrics.ServerSummary.to_dict
SERVER = obj(
    {
        "available": _FLAG,
        "samples": _COUNT,
        "busy_samples": _COUNT,
        "peak_kv_cache_usage": _NUM,
        "peak_waiting_requests": _NUM,
        "peak_running_requests": _NUM,
        "preemptions": _NUM,
        "prefix_cache_hit_rate": _NUM,
        "mean_itl_ms": _NUM,
        "kv_bound": _FLAG,
        "preempting": _FLAG,
        "notes": list_of(text(null=False), null=True),
    }
)
# tuner.bench.host_noise.HostNoise.to_dict (its from_dict float()s every present key).
HOST_NOISE = obj(
    {
        "window_s": num(null=False),
        "cores": integer(null=False, lo=0, hi=1 << 20),
        "foreign_share": num(null=False),
        "steal_share": num(null=False),
        "top": list_of(tuple_of(text(null=False), num(null=False))),  # (process, CPU s)
        "server_seen": flag(null=False),
        "foreign_known": flag(null=False),
        "own_cpu_s": num(null=False),
        "contaminated": _FLAG,
    }
)
# The ``tunelab`` block of tuner.bench.runner.BenchResult.to_dict.
BENCH_EXTRA = obj(
    {
        "started_at": _TEXT,
        "url": _TEXT,
        "workload": map_of(anything, null=True),
        "warmup_requests": _NUM,
        "failures": map_of(_NUM, null=True),
        "failure_examples": map_of(_TEXT, null=True),
        "server": SERVER,
        "mean_queue_time_ms": _NUM,
        "one_chunk_fraction": _NUM,
        "chunks_per_output_token": _NUM,
        "host_noise": HOST_NOISE,
        "trace_block_reuse": _NUM,  # a trace replay's block reuse (tuner.bench.trace; issue 30)
    }
)
_RESULT_TEXT = ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id")
_RESULT_NUMBERS = (
    "num_prompts",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "tokens_per_joule",
    "energy_j",
)
_RESULT_LISTS = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors")
# tuner.bench.runner.BenchResult.to_dict: vLLM bench keys plus the tunelab block.
RESULTS = obj(
    {
        **dict.fromkeys(_RESULT_TEXT, _TEXT),
        **dict.fromkeys(_RESULT_NUMBERS, _NUM),
        **dict.fromkeys(_RESULT_LISTS, list_of(anything, null=True)),
        "request_rate": either(_NUM, _TEXT, expected="a number or 'inf'"),
        "tunelab": BENCH_EXTRA,
    },
    patterns=((_LATENCY_KEY, _NUM),),
)
# tuner.telemetry.sampler.GpuWindow in WindowSummary.to_dict's "gpus".
GPU_WINDOW = obj(
    {
        "index": integer(null=False, lo=0, hi=1 << 16),
        "samples": _COUNT,
        "clean_samples": _COUNT,
        "dirt": _DIRT,
        # The report plots these: a finite 1e308 breaks the axis (NaN/None are gaps).
        "series": list_of(list_of(num(most=MAX_MEASURED)), null=True),
    },
    null=False,
    patterns=((re.compile(r"(mean|peak)_\w+|energy_j|covered_s"), _NUM),),
)
# tuner.telemetry.sampler.WindowSummary.to_dict plus the session's tokens_per_joule.
TELEMETRY = obj(
    {
        "samples": _COUNT,
        "samples_clean": _COUNT,
        "dirt": _DIRT,
        "gpus": list_of(GPU_WINDOW, null=True),
    },
    patterns=(
        (re.compile(r"t0|t1|duration_s|energy_j|coverage|(mean|peak)_\w+|tokens_per_joule"), _NUM),
    ),
)
# tuner.engine.effective.EffectiveConfig.to_dict (its from_dict indexes these keys).
EFFECTIVE = obj(
    {
        "values": map_of(
            obj({"value": scalar(null=False), "evidence": _TEXT}, null=False, required=("value",)),
            null=True,
        ),
        "received": _TEXT,
        "vllm_version": _TEXT,
        "mismatches": list_of(
            obj(
                dict.fromkeys(("knob", "requested", "effective", "evidence"), scalar(null=False)),
                null=False,
                required=("knob", "requested", "effective", "evidence"),
            ),
            null=True,
        ),
    }
)
# tuner.engine.aiter_shapes.UntunedShapes.to_dict (issue 29).
UNTUNED = obj(
    {
        "shapes": list_of(
            obj(
                {
                    "family": text(null=False),
                    "values": map_of(text(null=False)),
                    "table": _TEXT,
                    "lines": integer(null=False, lo=1),
                    "ranks": integer(null=False, lo=1),
                },
                null=False,
                required=("family", "values"),
            )
        ),
        "lines": _COUNT,
    }
)
# tuner.profiles.capture.ProfileRecord.to_dict (issue 29); ``summary`` is a
# tuner.profiles.trace.TraceProfile.to_dict.
PROFILE = obj(
    {
        "trace": _TEXT,
        "error": _TEXT,
        "requests": _COUNT,
        "concurrency": _COUNT,
        "started_at": num(finite=True),
        "ended_at": num(finite=True),
        "measured_ended_at": num(finite=True),
        "summary": obj(
            {
                "platform": text(null=False),
                "window_s": num(null=False, finite=True, most=MAX_MEASURED),
                "steps": _COUNT,
                "tokens": _COUNT,
                "family_s": map_of(num(null=False, finite=True, most=MAX_MEASURED)),
                "top": map_of(list_of(tuple_of(text(null=False), num(null=False, finite=True)))),
            },
            required=("platform", "window_s", "steps", "tokens", "family_s"),
        ),
    }
)
_FINGERPRINT_TEXT = (
    "vllm_version",
    "vllm_commit",
    "torch_version",
    "platform",
    "hip_version",
    "cuda_version",
    "driver_version",
    "aiter_version",
    "gpu_name",
    "compute_partition",
    "memory_partition",
    "numa_balancing",
)
# tuner.environment.Fingerprint.to_dict: text, one count, one wattage.
ENVIRONMENT = obj(
    {
        **dict.fromkeys(_FINGERPRINT_TEXT, _TEXT),
        "gpu_count": integer(lo=0, hi=1 << 16),
        "power_cap_w": _NUM,
    }
)
# What studies put in a trial's tags (tuner.studies: ab, sweep, search, capacity,
# verify, executor) and read back when a study is replayed.
TAGS = obj(
    {
        "kind": _TEXT,
        "knob": _TEXT,
        "value": anything,
        "values": map_of(anything, null=True),
        # capacity writes its SLO as one text; sweep and search write their bounds' list
        "slo": either(
            text(), list_of(text(null=False), null=True), expected="text or a list of text"
        ),
        "optuna_number": integer(),
        "wave": integer(null=False, lo=0),
        "repeats": integer(lo=0),
        "order": _TEXT,
        "probe": integer(),
        # capacity probes: the load variable, the launch and the search's grid
        "by": _TEXT,
        "launch": integer(),
        "step": _NUM,
        "limit": _NUM,
        "preset": _TEXT,
        "storage": _TEXT,
        "sequential": obj(
            {
                "max_repeats": integer(null=False, lo=1, hi=1 << 20),
                "alpha": num(null=False, finite=True),
                "spending": text(null=False),
                "equivalence": num(finite=True),
                "pooled": _FLAG,
            },
            required=("max_repeats", "alpha", "spending"),
        ),
        "pruned": map_of(anything, null=True),
        "profile": _TEXT,  # tuner.profiles.capture: "capture" or "armed"
    },
    null=False,
)


def knob_value(value: Any, path: str) -> None:
    """An engine argument's value: any JSON, but text that nests JSON too deeply is refused.

    Several readers parse a knob's text as JSON (``compilation-config`` when the
    launch script or the effective config is rendered): a stored value nested
    10^5 levels deep would raise RecursionError in each of them.
    """
    anything(value, path)
    if isinstance(value, str) and bounded.json_depth_exceeds(value):
        raise ShapeError(
            f"{path} holds JSON text nested more than {bounded.MAX_JSON_DEPTH} levels deep"
        )


CONFIG = obj(
    {
        "model": text(null=False),
        "env": map_of(text(null=False)),
        "engine": map_of(knob_value),
    },
    null=False,
    required=("model",),
)


def _typed(value: Any, path: str) -> None:
    """Already a typed value (a ``Finding``), not JSON: its own class checked it."""
    if not (is_dataclass(value) and not isinstance(value, type)):
        raise _fail(path, value, "a typed value")


# tuner.perfmodel.forecast.Forecast.to_dict (issue 31).
PREDICTION = obj(
    {
        "output_throughput": num(finite=True),
        "itl_ms": num(finite=True),
        "throughput_band": num(null=False, finite=True),
        "itl_band": num(null=False, finite=True),
        "trials": _COUNT,
        "reason": _TEXT,
    }
)
_TIME = num(finite=True)
_PID = integer(lo=0, hi=MAX_PID)
# Every field of Trial.to_dict. The workload, findings and guard record are then
# checked by their own parsers (Workload.from_dict, Finding.from_dict,
# GuardRun.from_dict via tuner.trials.guard_check.guard_of).
TRIAL_FIELDS: dict[str, Check] = {
    "id": text(null=False),
    "config": CONFIG,
    "workload": map_of(anything),
    "study": text(null=False),
    "objective": text(null=False),
    "status": text(null=False),
    "findings": list_of(either(_typed, map_of(anything), expected="an object")),
    "backend_requested": _TEXT,
    "backend_actual": _TEXT,
    "backend_inferred": _FLAG,
    "startup_seconds": _NUM,
    "results": RESULTS,
    "server": SERVER,
    "telemetry": TELEMETRY,
    "vllm_version": _TEXT,
    "platform": _TEXT,
    "gpu_names": list_of(text(null=False)),
    "gpu_slot": _TEXT,
    "log_path": _TEXT,
    "failure_reason": _TEXT,
    "created_at": num(null=False, finite=True),
    "started_at": _TIME,
    "finished_at": _TIME,
    "arm": _TEXT,
    "repeat": integer(lo=0, hi=MAX_PID),
    "tags": TAGS,
    "timings": map_of(_NUM),
    "engine_pid": _PID,
    "engine_created": _TIME,
    "engine_token": _TEXT,
    "owner_pid": _PID,
    "owner_created": _TIME,
    "effective": EFFECTIVE,
    "guard": map_of(anything, null=True),
    "environment": ENVIRONMENT,
    "untuned": UNTUNED,
    "profile": PROFILE,
    "prediction": PREDICTION,
}


def check_trial(data: Mapping[str, Any]) -> None:
    """Raises :class:`ShapeError` for the first field of ``data`` that has the wrong shape.

    ``data`` is a trial in :meth:`Trial.to_dict` form (a store row, an event
    line); fields it lacks are left to ``Trial``'s defaults, and derived or
    already-typed values (an ``EngineConfig``, a ``Workload``) are not JSON and
    are not checked here.
    """
    for name, check in TRIAL_FIELDS.items():
        value = data.get(name, _ABSENT)
        if value is _ABSENT or (is_dataclass(value) and not isinstance(value, type)):
            continue  # a default, or already typed (EngineConfig, Workload)
        check(value, name)
