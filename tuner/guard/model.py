"""Typed records of the guard: what the probes produced and what the comparison found.

Dicts only at the JSON boundary (the store's ``guard`` column): ``to_dict`` /
``from_dict`` here, which refuse a malformed record with ``ValueError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# What a log-probability can be. vLLM clamps -inf to -9999.0 (prompt logprobs,
# vllm/entrypoints/generate/base/serving.py clamp_prompt_logprobs); float32
# log_softmax can round a certain token a hair above 0. Outside: not a logprob.
MIN_LOGPROB = -1.0e5
MAX_LOGPROB = 1.0e-3
# Bounds on the other numbers of a stored guard record.
MAX_RECORD_TOKENS = 1 << 20


def logprob_problem(value: Any) -> str | None:
    """Why ``value`` is no usable logprob (``"non-finite logprobs (nan)"``), None when it is.

    Why so strict: a NaN compares unequal to itself and fails every ``>``
    test, so a drift threshold would rate it "close"; text, infinities and
    positive numbers are no log-probability either. Callers turn the reason
    into a guard failure or an "unknown" verdict, never agreement.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = repr(value)[:40] if isinstance(value, str | bool | None) else "a JSON container"
        return f"a logprob that is not a number ({shown})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"non-finite logprobs ({value})"
    if not MIN_LOGPROB <= value <= MAX_LOGPROB:
        return f"an impossible logprob ({str(value)[:24]}; a logprob is at most 0)"
    return None


class Verdict(StrEnum):
    """How a candidate's outputs compare with the baseline's."""

    SAME = "same"  # greedy tokens and logprobs bit-identical
    CLOSE = "close"  # greedy tokens identical, logprob drift under the threshold
    DRIFTED = "drifted"  # greedy tokens differ (or logprobs moved) beyond the thresholds
    UNKNOWN = "unknown"  # one side has no usable guard run


def _floats(raw: Any, what: str) -> list[float | None]:
    if not isinstance(raw, list):
        raise ValueError(f"{what} is not a list")
    out: list[float | None] = []
    for v in raw:
        if v is None:
            out.append(None)
        elif isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool)):
            # NaN, infinities and absurd values are kept as read: compare() calls such a
            # run "unknown" and says why (tuner.guard.compare.unusable). An int outside a
            # logprob's range stays an int (float() of a huge one raises OverflowError).
            out.append(
                v if isinstance(v, int) and not MIN_LOGPROB <= v <= MAX_LOGPROB else float(v)
            )
        else:
            raise ValueError(f"{what} holds a non-number: {str(v)[:40]!r}")
    return out


def _text(raw: Any, what: str) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"{what} is not text")
    return raw


def _count(raw: Any, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_RECORD_TOKENS:
        raise ValueError(f"{what} is not a token count: {str(raw)[:40]}")
    return raw


def _seconds(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError(f"guard seconds is not a finite number: {str(raw)[:40]}")
    return float(raw)


def _ints(raw: Any, what: str) -> list[int]:
    if not isinstance(raw, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in raw
    ):
        raise ValueError(f"{what} is not a list of token ids")
    return list(raw)


@dataclass(frozen=True)
class Thresholds:
    """Where **close** ends and **drifted** begins.

    Attributes:
        max_diverged_fraction: Fraction of probes whose greedy tokens may differ
            and still count as close. Default 0.0: any changed answer is drift —
            a kernel change that is merely numerically noisy keeps argmax tokens
            on short greedy probes almost always.
        max_mean_abs_dlogprob: Mean |Δ logprob| (nats, over the baseline's
            tokens) under which identical tokens count as close. Default 0.05:
            bf16 rounding noise of a kernel change is ~1e-3..1e-2 nats per token;
            0.05 is an order of magnitude above that and well below the ~0.7 nats
            of a token whose probability halves.
    """

    max_diverged_fraction: float = 0.0
    max_mean_abs_dlogprob: float = 0.05

    def to_dict(self) -> dict[str, float]:
        return {
            "max_diverged_fraction": self.max_diverged_fraction,
            "max_mean_abs_dlogprob": self.max_mean_abs_dlogprob,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Thresholds:
        """Inverse of to_dict; ValueError on a malformed record (a missing key keeps its default)."""
        if not isinstance(data, dict):
            raise ValueError("guard thresholds is not an object")
        out: dict[str, float] = {}
        for key in ("max_diverged_fraction", "max_mean_abs_dlogprob"):
            if key in data:
                v = data[key]
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                    raise ValueError(f"guard threshold {key} is not a number: {v!r}")
                out[key] = float(v)
        return cls(**out)


@dataclass
class ProbeResult:
    """One probe's greedy continuation.

    Attributes:
        prompt: The probe text.
        prompt_ids: The prompt's token ids as the server tokenised it.
        token_ids: The greedy continuation's token ids.
        logprobs: The logprob of each generated token (None where not given).
        forced_ids: The continuation fed back as prompt for the teacher-forced
            pass: the reference run's tokens, or this run's own when there is
            no reference (so a baseline and its candidates are both measured
            through the same prefill path and their numbers compare).
        forced_logprobs: The logprobs this engine gives ``forced_ids`` as
            prompt (``prompt_logprobs``): drift after an early divergence is
            still measured token by token. None when the pass failed.
    """

    prompt: str
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float | None]
    forced_ids: list[int] | None = None
    forced_logprobs: list[float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "prompt_ids": list(self.prompt_ids),
            "token_ids": list(self.token_ids),
            "logprobs": list(self.logprobs),
            "forced_ids": None if self.forced_ids is None else list(self.forced_ids),
            "forced_logprobs": None if self.forced_logprobs is None else list(self.forced_logprobs),
        }

    @classmethod
    def from_dict(cls, data: Any) -> ProbeResult:
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
            raise ValueError("a probe result needs a prompt")
        forced = data.get("forced_logprobs")
        forced_ids = data.get("forced_ids")
        return cls(
            prompt=data["prompt"],
            prompt_ids=_ints(data.get("prompt_ids", []), "prompt_ids"),
            token_ids=_ints(data.get("token_ids"), "token_ids"),
            logprobs=_floats(data.get("logprobs"), "logprobs"),
            forced_ids=None if forced_ids is None else _ints(forced_ids, "forced_ids"),
            forced_logprobs=None if forced is None else _floats(forced, "forced_logprobs"),
        )


@dataclass
class GuardRun:
    """The probes of one trial (or the reason there are none).

    Attributes:
        model: The served model name the probes asked.
        max_tokens: Greedy tokens asked per probe.
        probes: One result per probe, in probe order.
        seconds: Wall time of the whole guard (its cost per trial).
        error: Why the guard has no (complete) result; None when it ran.
        reference: Id of the trial whose tokens were teacher-forced, if any.
        thresholds: The thresholds the run was asked to be judged by
            (tuner.guard.settings.GuardSettings); None: the defaults.
    """

    model: str
    max_tokens: int
    probes: list[ProbeResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    reference: str | None = None
    thresholds: Thresholds | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.probes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "probes": [p.to_dict() for p in self.probes],
            "seconds": self.seconds,
            "error": self.error,
            "reference": self.reference,
            "thresholds": None if self.thresholds is None else self.thresholds.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> GuardRun:
        """Inverse of to_dict; ValueError on a malformed record (a stored row is foreign data)."""
        if not isinstance(data, dict):
            raise ValueError("a guard run is not an object")
        probes = data.get("probes", [])
        if not isinstance(probes, list):
            raise ValueError("guard probes is not a list")
        error = data.get("error")
        ref = data.get("reference")
        th = data.get("thresholds")
        return cls(
            model=_text(data.get("model", ""), "guard model"),
            max_tokens=_count(data.get("max_tokens", 0), "guard max_tokens"),
            probes=[ProbeResult.from_dict(p) for p in probes],
            seconds=_seconds(data.get("seconds", 0.0)),
            error=None if error is None else _text(error, "guard error"),
            reference=None if ref is None else _text(ref, "guard reference"),
            thresholds=None if th is None else Thresholds.from_dict(th),
        )


@dataclass(frozen=True)
class PromptDiff:
    """One probe compared.

    Attributes:
        prompt: The probe text.
        first_divergence: Index of the first generated token that differs, None if none.
        mean_abs_dlogprob: Mean |Δ logprob| over the baseline's tokens (teacher-forced
            where the candidate has them, else over the shared greedy prefix); None
            when no pair of numbers was available.
        forced: Whether the logprob drift is teacher-forced.
    """

    prompt: str
    first_divergence: int | None
    mean_abs_dlogprob: float | None
    forced: bool


@dataclass(frozen=True)
class GuardVerdict:
    """A candidate's outputs judged against a baseline's.

    Attributes:
        verdict: same / close / drifted / unknown.
        match_rate: Fraction of probes whose greedy tokens are identical.
        diffs: Per probe.
        mean_abs_dlogprob: Mean over the probes that have one (None if none).
        reason: Why the verdict is unknown, or a one-line summary.
    """

    verdict: Verdict
    match_rate: float
    diffs: tuple[PromptDiff, ...]
    mean_abs_dlogprob: float | None
    reason: str

    @property
    def diverged(self) -> list[PromptDiff]:
        return [d for d in self.diffs if d.first_divergence is not None]

    def summary(self) -> str:
        """One line, e.g. ``same on 8/8 prompts`` or ``drifted on 3/8 prompts from token 5``."""
        if self.verdict is Verdict.UNKNOWN:
            return f"unknown ({self.reason})"
        n = len(self.diffs)
        drift = (
            ""
            if self.mean_abs_dlogprob is None
            else f", mean |Δlogprob| {self.mean_abs_dlogprob:.2g}"
        )
        if self.verdict is Verdict.DRIFTED and self.diverged:
            first = min(d.first_divergence or 0 for d in self.diverged)
            return f"drifted on {len(self.diverged)}/{n} prompts from token {first}{drift}"
        if self.verdict is Verdict.DRIFTED:  # tokens identical, logprobs beyond the threshold
            return f"drifted: greedy tokens same on {n}/{n} prompts but {self.reason}"
        return f"{self.verdict} on {n - len(self.diverged)}/{n} prompts{drift}"

    @property
    def first_divergence(self) -> int | None:
        """The earliest generated position at which any probe's greedy tokens differ."""
        firsts = [d.first_divergence for d in self.diverged if d.first_divergence is not None]
        return min(firsts) if firsts else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": str(self.verdict),
            "match_rate": self.match_rate,
            "mean_abs_dlogprob": self.mean_abs_dlogprob,
            "reason": self.reason,
            "summary": self.summary(),
            "prompts": [
                {
                    "prompt": d.prompt,
                    "first_divergence": d.first_divergence,
                    "mean_abs_dlogprob": d.mean_abs_dlogprob,
                    "forced": d.forced,
                }
                for d in self.diffs
            ],
        }
