"""What a benchmark run sends: the workload, its validation and SLO parsing.

A workload is plain data so that a trial can store it, an A/B can repeat it
exactly and the CLI, the TUI and the tests all describe load the same way. Its
fields mirror `vllm bench serve` (random dataset input/output lengths with a
range ratio, request rate with gamma burstiness, max concurrency, warm-ups,
seed) so a user can translate one into the other without surprises.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

from tuner.errors import TunelabError

Endpoint = Literal["completions", "chat"]

# Goodput SLO keys: vLLM's three (ttft, tpot, e2el) plus tunelab's `itl`,
# which bounds the worst inter-token gap of a request (no visible stall).
SLO_KEYS = ("ttft", "tpot", "itl", "e2el")


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
    RANDOM = "random"  # what AUTO means without a dataset file; not given by users


# The kinds a user may ask for (RANDOM is what no --dataset means).
DATASET_KINDS = (
    DatasetKind.AUTO,
    DatasetKind.SHAREGPT,
    DatasetKind.JSONL,
    DatasetKind.TRACE,
    DatasetKind.PREFIX,
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
            (``{"timestamp": s, "input_len": n, "output_len": m}`` per line,
            replayed at its arrival times) or "prefix" (random prompts sharing
            prefix_groups prefixes of prefix_len tokens, for prefix caching).
        prefix_groups: Distinct shared prefixes for the "prefix" kind.
        prefix_len: Tokens of each shared prefix (before input_len more).
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
    dataset_kind: DatasetKind = DatasetKind.AUTO
    prefix_groups: int = 0
    prefix_len: int = 0
    endpoint: Endpoint = "completions"
    text_prompts: bool = False
    slo: dict[str, float] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    stall_timeout_s: float | None = 120.0

    def __post_init__(self) -> None:
        self.validate()
        # A kind given as text (CLI, JSON) is held as the enum from here on.
        object.__setattr__(self, "dataset_kind", DatasetKind(self.dataset_kind))

    @property
    def source_kind(self) -> DatasetKind:
        """The kind the prompts really come from: AUTO resolved to SHAREGPT or RANDOM."""
        if self.dataset_kind != DatasetKind.AUTO:
            return DatasetKind(self.dataset_kind)
        return DatasetKind.SHAREGPT if self.dataset_path else DatasetKind.RANDOM

    def validate(self) -> None:
        """Raise WorkloadError naming the first bad field and a valid range."""
        if self.input_len < 1:
            raise WorkloadError(f"input_len must be >= 1 token, got {self.input_len}")
        if self.output_len < 1:
            raise WorkloadError(f"output_len must be >= 1 token, got {self.output_len}")
        if self.num_prompts < 1:
            raise WorkloadError(f"num_prompts must be >= 1, got {self.num_prompts}")
        if not 0.0 <= self.range_ratio < 1.0:
            raise WorkloadError(f"range_ratio must be in [0, 1), got {self.range_ratio}")
        if self.duration_s is not None and not 0 < self.duration_s < math.inf:
            raise WorkloadError(f"duration_s must be > 0 seconds, got {self.duration_s}")
        if self.concurrency is not None and self.concurrency < 1:
            raise WorkloadError(
                f"concurrency must be >= 1 (or unset for unbounded), got {self.concurrency}"
            )
        if not self.request_rate > 0:
            raise WorkloadError(
                f"request_rate must be > 0 requests/s (use inf for all at once), "
                f"got {self.request_rate}"
            )
        if not 0 < self.burstiness < math.inf:
            raise WorkloadError(
                f"burstiness must be a finite number > 0 (1.0 = Poisson), got {self.burstiness}"
            )
        if self.warmup_requests < 0:
            raise WorkloadError(f"warmup_requests must be >= 0, got {self.warmup_requests}")
        if self.dataset_kind not in DATASET_KINDS:
            raise WorkloadError(
                f"dataset kind must be one of {', '.join(k or 'sharegpt' for k in DATASET_KINDS)}, "
                f"got {self.dataset_kind!r}"
            )
        if self.dataset_kind == DatasetKind.TRACE and self.duration_s is not None:
            raise WorkloadError("a trace sets its own arrival times; drop --duration")
        if self.dataset_kind in (DatasetKind.JSONL, DatasetKind.TRACE) and not self.dataset_path:
            raise WorkloadError(f"the {self.dataset_kind} dataset needs --dataset FILE.jsonl")
        needs_prefix = not (self.prefix_groups >= 1 and self.prefix_len >= 1)
        if self.dataset_kind == DatasetKind.PREFIX and needs_prefix:
            raise WorkloadError(
                "the prefix dataset needs --prefix-groups N >= 1 and --prefix-len L >= 1 tokens"
            )
        if self.endpoint not in ("completions", "chat"):
            raise WorkloadError(f"endpoint must be 'completions' or 'chat', got {self.endpoint!r}")
        if not 0 < self.request_timeout_s < math.inf:
            raise WorkloadError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")
        if self.stall_timeout_s is not None and not 0 < self.stall_timeout_s < math.inf:
            raise WorkloadError(f"stall_timeout_s must be > 0 or unset, got {self.stall_timeout_s}")
        for key, value in self.slo.items():
            if key not in SLO_KEYS:
                raise WorkloadError(
                    f"unknown SLO key {key!r}; use one of {', '.join(SLO_KEYS)} (values in ms)"
                )
            if not value > 0:
                raise WorkloadError(f"SLO {key} must be > 0 ms, got {value}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (inf rate written as the string "inf", as vLLM does)."""
        data = asdict(self)
        data["dataset_kind"] = DatasetKind(self.dataset_kind).value
        if math.isinf(self.request_rate):
            data["request_rate"] = "inf"
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        """Inverse of to_dict; unknown keys are an error, not silently dropped."""
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise WorkloadError(f"unknown workload field(s): {', '.join(sorted(unknown))}")
        values = dict(data)
        if values.get("request_rate") == "inf":
            values["request_rate"] = math.inf
        return cls(**values)


def parse_slo(text: str) -> dict[str, float]:
    """Parse an SLO string such as ``ttft:500,itl:50`` (milliseconds).

    Args:
        text: Comma-separated KEY:MS pairs; keys from SLO_KEYS.

    Returns:
        The objectives as a dict of key to milliseconds.

    Raises:
        WorkloadError: A pair is malformed, a key unknown or a value not > 0.
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
        if not ms > 0:
            raise WorkloadError(f"SLO {key} must be > 0 ms, got {ms}")
        slo[key] = ms
    return slo
