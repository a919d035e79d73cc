"""Judging a candidate's probe outputs against the baseline's (pure; no I/O).

Why two logprob sources: greedy tokens say whether answers changed; logprobs
say by how much the numbers moved even when the tokens did not. After the
first divergent token the free-running continuations no longer share a
context, so the drift is read teacher-forced (both runs scored the baseline's
tokens through ``prompt_logprobs``, see tuner.guard.run) wherever both runs
have that pass, and over the shared greedy prefix otherwise.

Agreement is only ever read from real numbers: a run whose logprobs hold a
NaN, an infinity, a missing value or something no log-probability can be (a
hostile or broken server, a hand-edited store), or whose logprob count does
not match its tokens, is "unknown" with the reason, never "same" or "close"
(a NaN fails every ``>`` test, so a threshold alone would call it close).
"""

from __future__ import annotations

import math

from tuner.guard.model import (
    GuardRun,
    GuardVerdict,
    ProbeResult,
    PromptDiff,
    Thresholds,
    Verdict,
    logprob_problem,
)

__all__ = ["Thresholds", "compare", "first_divergence", "unusable"]


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token (a length difference counts), None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _mean_abs(xs: list[float | None], ys: list[float | None]) -> float | None:
    pairs = [abs(x - y) for x, y in zip(xs, ys, strict=False) if x is not None and y is not None]
    return sum(pairs) / len(pairs) if pairs else None


def _forced_usable(base: ProbeResult, cand: ProbeResult) -> bool:
    """Both runs scored the baseline's own continuation teacher-forced."""
    return (
        base.forced_logprobs is not None
        and cand.forced_logprobs is not None
        and base.forced_ids == base.token_ids
        and cand.forced_ids == base.token_ids
    )


def _diff(base: ProbeResult, cand: ProbeResult) -> tuple[PromptDiff, bool]:
    """The probe's diff and whether its numbers are bit-identical."""
    div = first_divergence(base.token_ids, cand.token_ids)
    forced = _forced_usable(base, cand)
    if forced:
        assert base.forced_logprobs is not None and cand.forced_logprobs is not None
        drift = _mean_abs(base.forced_logprobs, cand.forced_logprobs)
    else:
        upto = len(base.token_ids) if div is None else div
        drift = _mean_abs(base.logprobs[:upto], cand.logprobs[:upto])
    identical = (
        div is None
        and base.logprobs == cand.logprobs
        and (not forced or base.forced_logprobs == cand.forced_logprobs)
    )
    return PromptDiff(base.prompt, div, drift, forced), identical


def _logprobs_problem(values: list[float | None], tokens: list[int] | None) -> str | None:
    """Why these logprobs cannot be compared (count or value), None when they can."""
    if tokens is not None and len(values) != len(tokens):
        return f"{len(values)} logprobs for {len(tokens)} tokens"
    return next((p for v in values if (p := logprob_problem(v)) is not None), None)


def unusable(run: GuardRun) -> str | None:
    """Why ``run``'s numbers cannot be judged (no tokens, bad logprobs), None when they can."""
    for i, probe in enumerate(run.probes, 1):
        if not probe.token_ids:
            return f"probe {i} has no generated tokens"
        problem = _logprobs_problem(probe.logprobs, probe.token_ids)
        if problem is None and probe.forced_logprobs is not None:
            problem = _logprobs_problem(probe.forced_logprobs, probe.forced_ids or [])
        if problem is not None:
            return f"probe {i} has {problem}"
    return None


def _unknown(reason: str) -> GuardVerdict:
    return GuardVerdict(Verdict.UNKNOWN, 0.0, (), None, reason)


def compare(
    baseline: GuardRun, candidate: GuardRun, thresholds: Thresholds | None = None
) -> GuardVerdict:
    """The candidate's verdict against the baseline (see :class:`Thresholds`).

    Probes are paired by prompt text; a probe set that differs, or a run with
    an error, gives **unknown** with the reason rather than a guess.
    """
    th = thresholds or Thresholds()
    for name, run in (("baseline", baseline), ("candidate", candidate)):
        if not run.ok:
            return _unknown(f"the {name} guard failed: {run.error or 'no probes'}")
        why = unusable(run)
        if why is not None:
            return _unknown(f"the {name}'s guard output is not comparable: {why}")
    if not all(math.isfinite(v) for v in (th.max_diverged_fraction, th.max_mean_abs_dlogprob)):
        return _unknown("the guard thresholds are not finite numbers")
    if [p.prompt for p in baseline.probes] != [p.prompt for p in candidate.probes]:
        return _unknown("the two runs asked different probes")
    if baseline.max_tokens != candidate.max_tokens:
        return _unknown("the two runs asked different token counts")
    results = [_diff(b, c) for b, c in zip(baseline.probes, candidate.probes, strict=True)]
    diffs = tuple(d for d, _ in results)
    n = len(diffs)
    diverged = sum(1 for d in diffs if d.first_divergence is not None)
    drifts = [d.mean_abs_dlogprob for d in diffs if d.mean_abs_dlogprob is not None]
    mean_drift = sum(drifts) / len(drifts) if drifts else None
    if all(same for _, same in results):
        verdict, reason = Verdict.SAME, "greedy tokens and logprobs bit-identical"
    elif diverged / n > th.max_diverged_fraction:
        verdict = Verdict.DRIFTED
        reason = f"greedy tokens differ on {diverged}/{n} prompts"
    elif mean_drift is not None and mean_drift > th.max_mean_abs_dlogprob:
        verdict = Verdict.DRIFTED
        reason = f"mean |Δlogprob| {mean_drift:.3g} over {th.max_mean_abs_dlogprob:g}"
    else:
        verdict, reason = Verdict.CLOSE, "greedy tokens identical, logprobs within threshold"
    return GuardVerdict(verdict, (n - diverged) / n, diffs, mean_drift, reason)
