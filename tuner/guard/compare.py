"""Judging a candidate's probe outputs against the baseline's (pure; no I/O).

Why two logprob sources: greedy tokens say whether answers changed; logprobs
say by how much the numbers moved even when the tokens did not. After the
first divergent token the free-running continuations no longer share a
context, so the drift is read teacher-forced (both runs scored the baseline's
tokens through ``prompt_logprobs``, see tuner.guard.run) wherever both runs
have that pass, and over the shared greedy prefix otherwise.
"""

from __future__ import annotations

from tuner.guard.model import (
    GuardRun,
    GuardVerdict,
    ProbeResult,
    PromptDiff,
    Thresholds,
    Verdict,
)

__all__ = ["Thresholds", "compare", "first_divergence"]


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
            why = run.error or "no probes"
            return GuardVerdict(Verdict.UNKNOWN, 0.0, (), None, f"the {name} guard failed: {why}")
    if [p.prompt for p in baseline.probes] != [p.prompt for p in candidate.probes]:
        return GuardVerdict(Verdict.UNKNOWN, 0.0, (), None, "the two runs asked different probes")
    if baseline.max_tokens != candidate.max_tokens:
        return GuardVerdict(
            Verdict.UNKNOWN, 0.0, (), None, "the two runs asked different token counts"
        )
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
