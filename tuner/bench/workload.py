"""What a benchmark run sends: the workload, its validation and SLO parsing.

A workload is plain data so that a trial can store it, an A/B can repeat it
exactly and the CLI, the TUI and the tests all describe load the same way. Its
fields mirror `vllm bench serve` (random dataset input/output lengths with a
range ratio, request rate with gamma burstiness, max concurrency, warm-ups,
seed) so a user can translate one into the other without surprises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

from tuner.errors import TunelabError

Endpoint = Literal["completions", "chat"]

# Goodput SLO keys: vLLM's three (ttft, tpot, e2el) plus tunelab's `itl`,
# which bounds the worst inter-token gap of a request (no visible stall).
SLO_KEYS = ("ttft", "tpot", "itl", "e2el")

# Sane maxima of every numeric field (issue 26). Prompts, warm-ups and their
# bodies are built in memory before the clock starts, and every token that
# streams back is timed, so a typo such as 1e11 would grow until the kernel
# kills the process. Each bound is far above a real benchmark and is checked
# here, so the CLI, the TUI, a job spec and a preset's [workload] all get it.
MAX_LEN = 10_000_000  # tokens per prompt or per output: above any model's context window
MAX_NUM_PROMPTS = 1_000_000  # counted requests of one run (and warm-ups, and prefix groups)
MAX_CONCURRENCY = 65_536  # requests in flight: more than one client has ports to open
# Prompt + output tokens of a whole run (warm-ups and shared prefixes included).
# Prompts are held as ids and as request bodies (~15 bytes a token) and every
# streamed token is timed (~30 bytes), so this is a few GB at most; a capacity
# probe of 1024 users of 32k-token prompts (134M) still fits.
MAX_WORKLOAD_TOKENS = 250_000_000
MIN_REQUEST_RATE = 0.001  # requests/s: one every ~17 minutes; below, use --concurrency 1
MAX_REQUEST_RATE = 1_000_000.0  # requests/s: above this, "inf" (all at once) is what happens
MIN_BURSTINESS = 0.001  # gamma shape; smaller draws gaps of 0 or of days
MAX_BURSTINESS = 1000.0  # gamma shape; larger is a metronome already
MAX_SECONDS = 7 * 24 * 3600.0  # duration and timeouts: a week (the event loop needs finite ones)
MAX_SEED = 2**63 - 1  # seeds are stored and compared as 64-bit integers
# A trace's gaps times this (issue 30): 1000x faster to 1000x slower covers "replay a
# day in minutes" and "slow a burst down"; beyond, the gaps are all 0 or all days.
MIN_TIME_SCALE = 0.001
MAX_TIME_SCALE = 1000.0
MAX_TURNS = 1000  # turns of one conversation: past any chat a person or an agent keeps

_COUNTS: tuple[tuple[str, int, int, str], ...] = (
    # field, least, most, unit for messages
    ("input_len", 1, MAX_LEN, "tokens"),
    ("output_len", 1, MAX_LEN, "tokens"),
    ("num_prompts", 1, MAX_NUM_PROMPTS, "requests"),
    ("warmup_requests", 0, MAX_NUM_PROMPTS, "requests"),
    ("prefix_groups", 0, MAX_NUM_PROMPTS, "prefixes"),
    ("prefix_len", 0, MAX_LEN, "tokens"),
    ("turns", 1, MAX_TURNS, "turns"),
    ("max_context", 0, MAX_LEN, "tokens"),
    ("seed", -MAX_SEED - 1, MAX_SEED, ""),
)


class WorkloadError(TunelabError, ValueError):
    """A workload that cannot be run; the message says what to change."""


class DatasetKind(StrEnum):
    """Where a workload's prompts come from.

    A StrEnum, so the stored and printed form is the plain word ("" for AUTO)
    and a kind read back from JSON compares equal to the member.
    """

    AUTO = ""  # ShareGPT when dataset_path is set, else RANDOM
    SHAREGPT = "sharegpt"
    JSONL = "jsonl"
    TRACE = "trace"
    PREFIX = "prefix"
    SESSIONS = "sessions"  # multi-turn conversations (tuner.bench.sessions)
    RANDOM = "random"  # what AUTO means without a dataset file; not given by users


# The kinds a user may ask for (RANDOM is what no --dataset means).
DATASET_KINDS = (
    DatasetKind.AUTO,
    DatasetKind.SHAREGPT,
    DatasetKind.JSONL,
    DatasetKind.TRACE,
    DatasetKind.PREFIX,
    DatasetKind.SESSIONS,
)


@dataclass(frozen=True)
class Workload:
    """One benchmark workload.

    Attributes:
        input_len: Prompt length in tokens (exact for random prompts).
        output_len: Tokens to generate per request (enforced with ignore_eos
            and min_tokens, so the server cannot stop early).
        num_prompts: Requests to send (counted ones; warm-ups are extra).
        range_ratio: Lengths are drawn uniformly from
            [len * (1 - r), len * (1 + r)], as in vLLM's random dataset.
        duration_s: If set, keep sending (cycling the prompts) until this many
            seconds passed, then wait for the requests in flight.
        concurrency: Most requests in flight at once (None: unbounded).
        request_rate: Arrivals per second (inf: all at once).
        burstiness: Gamma shape of inter-arrival times; 1.0 is Poisson, lower
            is burstier, higher is more regular.
        warmup_requests: Requests sent and awaited before measuring.
        seed: Makes prompts, lengths and arrival times repeatable.
        dataset_path: File to take prompts from instead of random token ids
            (ShareGPT JSON, or JSONL for the "jsonl" and "trace" kinds).
        dataset_kind: "" (ShareGPT when dataset_path is set, else random),
            "jsonl" (``{"prompt": ..., "output_len": ...}`` per line), "trace"
            (``{"timestamp": s, "input_len": n, "output_len": m}`` per line, or
            a Mooncake trace with ``hash_ids``, replayed at its arrival times:
            tuner.bench.trace) or "prefix" (random prompts sharing
            prefix_groups prefixes of prefix_len tokens, for prefix caching).
        prefix_groups: Distinct shared prefixes for the "prefix" kind; for
            "sessions", distinct shared system prompts (conversation i opens
            with prompt i mod prefix_groups).
        prefix_len: Tokens of each shared prefix (before input_len more).
        time_scale: The "trace" kind's inter-arrival gaps are multiplied by
            this (0.5 replays twice as fast); 1 for every other kind.
        turns: The "sessions" kind: turns of each conversation. There
            ``num_prompts`` counts conversations, ``concurrency`` the
            conversations open at once, ``input_len`` a user turn's tokens and
            ``output_len`` an answer's; each turn is sent after the previous
            answer, its prompt the whole history (answers included).
        think_time_s: The "sessions" kind: mean pause between an answer and the
            next turn (exponential, seeded), as a user reading; 0 for none.
        max_context: The "sessions" kind: a conversation ends before a turn
            whose prompt would pass this many tokens (0: no limit).
        endpoint: `completions` (/v1/completions) or `chat`.
        text_prompts: Send random prompts as text decoded from their ids, so
            the server tokenises them as it would a real client's (and as
            vLLM's random dataset does); lengths are then approximate.
        slo: Goodput objectives in ms, keys from SLO_KEYS.
        request_timeout_s: A request is cut and counted failed after this long.
        stall_timeout_s: A request is cut when no byte arrives for this long.
    """

    input_len: int = 128
    output_len: int = 128
    num_prompts: int = 64
    range_ratio: float = 0.0
    duration_s: float | None = None
    concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    warmup_requests: int = 0
    seed: int = 0
    dataset_path: str | None = None
    # Text is accepted (the CLI, JSON) and held as the enum from __post_init__ on.
    dataset_kind: DatasetKind | str = DatasetKind.AUTO
    prefix_groups: int = 0
    prefix_len: int = 0
    time_scale: float = 1.0
    turns: int = 1
    think_time_s: float = 0.0
    max_context: int = 0
    endpoint: Endpoint = "completions"
    text_prompts: bool = False
    slo: dict[str, float] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    stall_timeout_s: float | None = 120.0

    def __post_init__(self) -> None:
        self._whole_numbers()
        self.validate()
        # A kind given as text (CLI, JSON) is held as the enum from here on.
        object.__setattr__(self, "dataset_kind", DatasetKind(self.dataset_kind))

    def _whole_numbers(self) -> None:
        """Hold a count written as a whole float (``128.0`` in TOML or JSON) as an int."""
        for name in (*(c[0] for c in _COUNTS), "concurrency"):
            value = getattr(self, name)
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                object.__setattr__(self, name, int(value))

    @property
    def source_kind(self) -> DatasetKind:
        """The kind the prompts really come from: AUTO resolved to SHAREGPT or RANDOM."""
        if self.dataset_kind != DatasetKind.AUTO:
            return DatasetKind(self.dataset_kind)
        return DatasetKind.SHAREGPT if self.dataset_path else DatasetKind.RANDOM

    def validate(self) -> None:
        """Raise WorkloadError naming the first bad field and a valid range.

        Types first (a job spec or a preset's ``[workload]`` may hold any JSON
        or TOML value), then each field's range, then the run's total size.
        """
        for name, least, most, unit in _COUNTS:
            check_count(name, getattr(self, name), least, most, unit)
        if self.concurrency is not None:
            check_count("concurrency", self.concurrency, 1, MAX_CONCURRENCY, "requests in flight")
        self._check_floats()
        self._check_choices()
        _check_slo(self.slo)
        self._check_size()

    def _check_floats(self) -> None:
        """Rates, shapes and times: finite numbers in their ranges (NaN and 1e-320 too)."""
        if not (_is_number(self.range_ratio) and 0.0 <= self.range_ratio < 1.0):
            raise WorkloadError(
                f"range_ratio must be in [0, 1), got {self.range_ratio!r}",
                fix="give a spread such as 0.1 (lengths n*0.9..n*1.1), or 0 for exact lengths",
            )
        check_rate("request_rate", self.request_rate)
        burst = self.burstiness
        if not (_is_number(burst) and MIN_BURSTINESS <= burst <= MAX_BURSTINESS):
            raise WorkloadError(
                f"burstiness must be {MIN_BURSTINESS:g} to {MAX_BURSTINESS:g} (1.0 = Poisson, "
                f"lower is burstier), got {burst!r}",
                fix="give 1.0 for Poisson arrivals, e.g. 0.5 for bursts or 4 for regular ones",
            )
        _check_time_scale(self.time_scale)
        if not (_is_number(self.think_time_s) and 0 <= self.think_time_s <= MAX_SECONDS):
            raise WorkloadError(
                f"think_time_s must be 0 to {MAX_SECONDS:g} seconds, got {self.think_time_s!r}",
                fix="give the mean pause between an answer and the next turn, e.g. 2, or 0",
            )
        _check_seconds("duration_s", self.duration_s, optional=True)
        _check_seconds("request_timeout_s", self.request_timeout_s, optional=False)
        _check_seconds("stall_timeout_s", self.stall_timeout_s, optional=True)

    def _check_choices(self) -> None:
        """The dataset kind and its file, the endpoint, the text switch."""
        if self.dataset_kind not in DATASET_KINDS:
            raise WorkloadError(
                f"dataset kind must be one of {', '.join(k for k in DATASET_KINDS if k)}, "
                f"got {self.dataset_kind!r}"
            )
        if self.dataset_path is not None and not isinstance(self.dataset_path, str):
            raise WorkloadError(
                f"dataset_path must be a file path (text), got {type(self.dataset_path).__name__}"
            )
        if self.dataset_kind == DatasetKind.TRACE and self.duration_s is not None:
            raise WorkloadError("a trace sets its own arrival times; drop --duration")
        if self.time_scale != 1.0 and self.dataset_kind != DatasetKind.TRACE:
            raise WorkloadError(
                "time_scale stretches a trace's arrival times; this workload has no trace",
                fix="use --time-scale with --dataset-kind trace, or drop it",
            )
        if self.dataset_kind in (DatasetKind.JSONL, DatasetKind.TRACE) and not self.dataset_path:
            raise WorkloadError(f"the {self.dataset_kind} dataset needs --dataset FILE.jsonl")
        needs_prefix = not (self.prefix_groups >= 1 and self.prefix_len >= 1)
        shared = bool(self.prefix_groups or self.prefix_len)
        if self.dataset_kind == DatasetKind.SESSIONS and shared and needs_prefix:
            raise WorkloadError(
                "a shared system prompt for sessions needs --prefix-len L >= 1 tokens and "
                "--prefix-groups N >= 1 (1: every conversation shares one)"
            )
        if self.dataset_kind == DatasetKind.PREFIX and needs_prefix:
            raise WorkloadError(
                "the prefix dataset needs --prefix-groups N >= 1 and --prefix-len L >= 1 tokens"
            )
        self._check_sessions()
        if self.endpoint not in ("completions", "chat"):
            raise WorkloadError(f"endpoint must be 'completions' or 'chat', got {self.endpoint!r}")
        if not isinstance(self.text_prompts, bool):
            raise WorkloadError(f"text_prompts must be true or false, got {self.text_prompts!r}")

    def _check_sessions(self) -> None:
        """Turns, think time and a context limit belong to the sessions kind only."""
        sessions = self.dataset_kind == DatasetKind.SESSIONS
        if not sessions:
            for name, default in (("turns", 1), ("think_time_s", 0.0), ("max_context", 0)):
                if getattr(self, name) != default:
                    raise WorkloadError(
                        f"{name} describes multi-turn conversations; this workload has none",
                        fix="use it with --dataset-kind sessions, or drop it",
                    )
            return
        if self.duration_s is not None:
            raise WorkloadError(
                "a sessions run ends when its conversations do; drop --duration",
                fix="size it with --num-prompts (conversations) and --turns",
            )

    def _check_size(self) -> None:
        """The tokens the whole run builds and times stay within MAX_WORKLOAD_TOKENS."""
        spread = 1.0 + self.range_ratio
        # A conversation's turn k sends the whole history: k turns and k - 1 answers.
        turns = self.turns
        requests = self.num_prompts * turns + self.warmup_requests
        per_request = (
            self.prefix_len + (self.input_len + self.output_len) * spread * (turns + 1) / 2
        )
        total = requests * per_request + self.prefix_groups * self.prefix_len
        if total > MAX_WORKLOAD_TOKENS:
            raise WorkloadError(
                f"the workload holds about {total:.3g} prompt and output tokens "
                f"({requests} requests of up to {per_request:.0f}); at most "
                f"{MAX_WORKLOAD_TOKENS:,} are built and timed in memory",
                fix="lower num_prompts, warm-ups, input_len or output_len",
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (inf rate written as the string "inf", as vLLM does).

        ``time_scale`` and the sessions fields are left out at their defaults:
        studies key their trials on this dict (tuner.studies), so a workload
        stored before the fields existed keeps its key, and one that uses
        them differs.
        """
        data = asdict(self)
        for name, default in (("time_scale", 1.0), ("turns", 1), ("think_time_s", 0.0),
                              ("max_context", 0)):  # fmt: skip
            if data[name] == default:
                del data[name]
        data["dataset_kind"] = DatasetKind(self.dataset_kind).value
        if math.isinf(self.request_rate):
            data["request_rate"] = "inf"
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        """Inverse of to_dict; unknown keys are an error, not silently dropped.

        Raises:
            WorkloadError: ``data`` is not a mapping, has unknown keys or a bad value.
        """
        if not isinstance(data, Mapping):
            raise WorkloadError(
                f"a workload is a table of fields (input_len, num_prompts, ...), "
                f"got {type(data).__name__}"
            )
        known = set(cls.__dataclass_fields__)
        unknown = {str(k) for k in data} - known
        if unknown:
            raise WorkloadError(f"unknown workload field(s): {', '.join(sorted(unknown))}")
        values = dict(data)
        if values.get("request_rate") == "inf":
            values["request_rate"] = math.inf
        return cls(**values)


def _is_number(value: object) -> bool:
    """An int or float that is not a bool and not NaN (inf is left to the caller)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def check_count(name: str, value: object, least: int, most: int, unit: str = "") -> None:
    """A whole number in ``least..most``.

    Raises:
        WorkloadError: naming ``name`` (the field, or the flag the user typed) and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(
            f"{name} must be a whole number, got {value!r}",
            fix=f"give {name} a whole number from {least:,} to {most:,}",
        )
    what = f" {unit}" if unit else ""
    fix = f"give {name} a value from {least:,} to {most:,}"
    if value < least:
        raise WorkloadError(f"{name} must be >= {least}{what}, got {value:,}", fix=fix)
    if value > most:
        raise WorkloadError(f"{name} must be at most {most:,}{what}, got {value:,}", fix=fix)


def check_rate(name: str, rate: object) -> None:
    """Arrivals per second: MIN_REQUEST_RATE..MAX_REQUEST_RATE, or inf (all at once).

    A denormal rate such as 1e-320 would make the mean gap 1/rate overflow to
    inf and the schedule degenerate into "all at once"; NaN compares false
    everywhere. Both are refused here, with the range.

    Raises:
        WorkloadError: naming ``name`` (the field or the flag the user typed).
    """
    fix = "give a rate such as 4, or inf; for one request at a time use concurrency 1"
    number = isinstance(rate, int | float) and _is_number(rate)
    if not number or rate <= 0:  # type: ignore[operator]
        raise WorkloadError(
            f"{name} must be > 0 requests/s (use inf for all at once), got {rate!r}", fix=fix
        )
    if rate == math.inf or MIN_REQUEST_RATE <= rate <= MAX_REQUEST_RATE:  # type: ignore[operator]
        return
    raise WorkloadError(
        f"{name} must be {MIN_REQUEST_RATE:g} to {MAX_REQUEST_RATE:g} requests/s, "
        f"or inf for all at once; got {rate!r}",
        fix=fix,
    )


def _check_time_scale(scale: object) -> None:
    """A trace's gap multiplier: a finite number from MIN_TIME_SCALE to MAX_TIME_SCALE."""
    if not (_is_number(scale) and MIN_TIME_SCALE <= scale <= MAX_TIME_SCALE):  # type: ignore[operator]
        raise WorkloadError(
            f"time_scale must be {MIN_TIME_SCALE:g} to {MAX_TIME_SCALE:g} (the trace's gaps "
            f"times this; 0.5 is twice as fast), got {scale!r}",
            fix="give e.g. --time-scale 0.5 to replay twice as fast, 2 for half speed",
        )


def _check_seconds(name: str, value: object, *, optional: bool) -> None:
    """A time in seconds: finite, above 0, at most MAX_SECONDS (or None when ``optional``)."""
    if value is None and optional:
        return
    if not (_is_number(value) and 0 < value <= MAX_SECONDS):  # type: ignore[operator]
        unset = " or unset" if optional else ""
        raise WorkloadError(
            f"{name} must be above 0 and at most {MAX_SECONDS:g} seconds (a week){unset}, "
            f"got {value!r}",
            fix=f"give {name} a finite number of seconds up to {MAX_SECONDS:g}",
        )


def _check_slo(slo: object) -> None:
    """Goodput objectives: a mapping of SLO_KEYS to finite milliseconds above 0."""
    fix = "write goodput objectives as ttft:500,itl:50 (milliseconds)"
    if not isinstance(slo, dict):
        raise WorkloadError(
            f"slo must map {', '.join(SLO_KEYS)} to milliseconds, got {slo!r}", fix=fix
        )
    for key, value in slo.items():
        if key not in SLO_KEYS:
            raise WorkloadError(
                f"unknown SLO key {key!r}; use one of {', '.join(SLO_KEYS)} (values in ms)", fix=fix
            )
        if not (_is_number(value) and 0 < value < math.inf):
            raise WorkloadError(
                f"SLO {key} must be a finite number of ms > 0, got {value!r}", fix=fix
            )


def parse_slo(text: str) -> dict[str, float]:
    """Parse an SLO string such as ``ttft:500,itl:50`` (milliseconds).

    Args:
        text: Comma-separated KEY:MS pairs; keys from SLO_KEYS.

    Returns:
        The objectives as a dict of key to milliseconds.

    Raises:
        WorkloadError: A pair is malformed, a key unknown, a value not a finite
            number > 0, or text that holds no pair at all (``",,,"``).
    """
    slo: dict[str, float] = {}
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        key, sep, value = part.partition(":")
        key = key.strip().lower()
        if not sep:
            raise WorkloadError(f"SLO entry {part!r} has no ':'; write it as KEY:MS, e.g. ttft:500")
        if key not in SLO_KEYS:
            raise WorkloadError(
                f"unknown SLO key {key!r} in {text!r}; use {', '.join(SLO_KEYS)} (values in ms)"
            )
        try:
            ms = float(value)
        except ValueError:
            raise WorkloadError(
                f"SLO {key} value {value!r} is not a number of milliseconds"
            ) from None
        if not 0 < ms < math.inf:
            raise WorkloadError(f"SLO {key} must be a finite number of ms > 0, got {ms}")
        slo[key] = ms
    if not slo and text.strip():
        raise WorkloadError(
            f"SLO {text!r} holds no KEY:MS pair",
            fix=f"write e.g. ttft:500,itl:50 (keys {', '.join(SLO_KEYS)}), or leave it empty",
        )
    return slo
