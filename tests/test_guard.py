"""Drift guard: the pure comparison and the probe runner against a loopback stub server."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.guard_stub import OTHER_LOGPROB, GuardStub
from tuner.guard import GuardRun, ProbeResult, Thresholds, Verdict, compare, run_probes
from tuner.guard.compare import first_divergence


def _probe(prompt: str, ids: list[int], lps: list[float], forced: list[float] | None = None):
    return ProbeResult(
        prompt,
        [1, 2],
        list(ids),
        list(lps),
        forced_ids=None if forced is None else list(ids),
        forced_logprobs=forced,
    )


def _run(*probes: ProbeResult) -> GuardRun:
    return GuardRun(model="m", max_tokens=4, probes=list(probes))


BASE = _run(
    _probe("a", [5, 6, 7, 8], [-0.1, -0.2, -0.3, -0.4], [-0.1, -0.2, -0.3, -0.4]),
    _probe("b", [9, 9, 9, 9], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]),
)


# -- compare (pure) ----------------------------------------------------------------
def test_identical_runs_are_same() -> None:
    v = compare(BASE, GuardRun.from_dict(BASE.to_dict()))
    assert v.verdict is Verdict.SAME
    assert v.match_rate == 1.0
    assert v.mean_abs_dlogprob == 0.0
    assert [d.first_divergence for d in v.diffs] == [None, None]


def test_small_logprob_drift_with_same_tokens_is_close() -> None:
    cand = _run(
        _probe("a", [5, 6, 7, 8], [-0.11, -0.2, -0.3, -0.4], [-0.11, -0.21, -0.3, -0.4]),
        _probe("b", [9, 9, 9, 9], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]),
    )
    v = compare(BASE, cand)
    assert v.verdict is Verdict.CLOSE
    assert v.match_rate == 1.0
    # teacher-forced: prompt a moved 0.01 on two of four tokens; b not at all
    assert v.diffs[0].forced and v.diffs[0].mean_abs_dlogprob == pytest.approx(0.005)
    assert v.mean_abs_dlogprob == pytest.approx(0.0025)


def test_large_logprob_drift_with_same_tokens_is_drifted_and_threshold_is_settable() -> None:
    cand = _run(
        _probe("a", [5, 6, 7, 8], [-0.5] * 4, [-0.5, -0.6, -0.7, -0.8]),
        BASE.probes[1],
    )
    assert compare(BASE, cand).verdict is Verdict.DRIFTED
    assert compare(BASE, cand, Thresholds(max_mean_abs_dlogprob=1.0)).verdict is Verdict.CLOSE


def test_changed_tokens_are_drifted_with_divergence_position() -> None:
    cand = _run(
        _probe("a", [5, 6, 99, 98], [-0.1, -0.2, -0.3, -0.4]),
        BASE.probes[1],
    )
    v = compare(BASE, cand)
    assert v.verdict is Verdict.DRIFTED
    assert v.match_rate == 0.5
    assert [d.first_divergence for d in v.diffs] == [2, None]
    assert v.summary().startswith("drifted on 1/2 prompts from token 2")
    # Allowing half the prompts to change makes the same run close.
    assert compare(BASE, cand, Thresholds(max_diverged_fraction=0.5)).verdict is Verdict.CLOSE


def test_without_forced_pass_drift_is_read_over_shared_prefix_only() -> None:
    cand = _run(_probe("a", [5, 6, 99, 98], [-0.1, -0.3, -9.0, -9.0]), BASE.probes[1])
    d = compare(BASE, cand).diffs[0]
    assert not d.forced
    assert d.mean_abs_dlogprob == pytest.approx(0.05)  # tokens 0..1 only, not the -9s after


def test_teacher_forced_drift_reaches_past_the_divergence() -> None:
    # Tokens diverge at 1, but forced scoring of the baseline's tokens shows where numbers moved.
    cand = _run(
        _probe("a", [5, 77, 78, 79], [-0.1, -0.2, -0.3, -0.4], [-0.1, -0.2, -0.3, -2.4]),
        BASE.probes[1],
    )
    cand.probes[0].forced_ids = [5, 6, 7, 8]  # scored the baseline's continuation
    d = compare(BASE, cand).diffs[0]
    assert d.forced and d.first_divergence == 1
    assert d.mean_abs_dlogprob == pytest.approx(0.5)


def test_unknown_when_a_side_failed_or_probes_differ() -> None:
    bad = GuardRun(model="m", max_tokens=4, error="HTTP 500")
    assert compare(BASE, bad).verdict is Verdict.UNKNOWN
    assert "HTTP 500" in compare(bad, BASE).reason
    other = _run(_probe("zzz", [1, 2, 3, 4], [0.0] * 4), BASE.probes[1])
    assert compare(BASE, other).verdict is Verdict.UNKNOWN


def test_first_divergence_counts_length() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 2]) == 2
    assert first_divergence([4], [5]) == 0


def test_from_dict_refuses_malformed_records() -> None:
    with pytest.raises(ValueError):
        GuardRun.from_dict({"probes": [{"prompt": "a", "token_ids": ["x"], "logprobs": []}]})
    with pytest.raises(ValueError):
        GuardRun.from_dict([1, 2])


# -- run_probes against the loopback stub ------------------------------------------
PROMPTS = ("The capital of France is", "def f(x):", "1, 2, 3,")


def _probes(stub: GuardStub, ref: GuardRun | None = None) -> GuardRun:
    return asyncio.run(run_probes(stub.url, "stub", PROMPTS, 6, ref, reference_id="t0"))


def test_run_probes_records_tokens_logprobs_and_forced_pass() -> None:
    with GuardStub() as stub:
        run = _probes(stub)
        again = _probes(stub, run)
    assert run.ok and len(run.probes) == 3
    p = run.probes[0]
    assert len(p.token_ids) == 6 and len(p.logprobs) == 6
    assert p.forced_ids == p.token_ids
    assert p.forced_logprobs == p.logprobs  # the stub scores its own argmax identically
    greedy = stub.requests[0]
    assert greedy["temperature"] == 0 and greedy["logprobs"] == 1 and greedy["max_tokens"] == 6
    forced = stub.requests[1]
    assert forced["prompt"] == [*p.prompt_ids, *p.token_ids] and forced["max_tokens"] == 1
    assert compare(run, again).verdict is Verdict.SAME
    assert again.reference == "t0"


def test_run_probes_detects_drift_from_the_right_token() -> None:
    with GuardStub() as stub:
        base = _probes(stub)
        stub.diverge = {"def f": 3}
        cand = _probes(stub, base)
    v = compare(base, cand)
    assert v.verdict is Verdict.DRIFTED
    assert [d.first_divergence for d in v.diffs] == [None, 3, None]
    # Teacher-forced: the candidate gives the baseline's tokens 3..5 OTHER_LOGPROB.
    forced = cand.probes[1].forced_logprobs
    assert forced is not None and forced[3:] == [OTHER_LOGPROB] * 3
    assert v.diffs[1].forced


def test_run_probes_logprob_shift_is_close() -> None:
    with GuardStub() as stub:
        base = _probes(stub)
        stub.lp_shift = -0.01
        cand = _probes(stub, base)
    v = compare(base, cand)
    assert v.verdict is Verdict.CLOSE
    assert v.mean_abs_dlogprob == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        ("http500", "HTTP 500"),
        ("notjson", "non-JSON"),
        ("no_token_ids", "token_ids"),
        ("short_logprobs", "logprobs do not match"),
        ("huge", "KiB"),
        ("forced500", "teacher-forced"),
    ],
)
def test_bad_answers_give_an_error_reason_not_a_traceback(fault: str, words: str) -> None:
    with GuardStub(fault=fault) as stub:
        run = _probes(stub)
    assert not run.ok
    assert run.error is not None and words in run.error and run.error.startswith("probe 1/3")
    assert compare(run, run).verdict is Verdict.UNKNOWN


def test_unreachable_server_gives_an_error_reason() -> None:
    run = asyncio.run(run_probes("http://127.0.0.1:9", "m", PROMPTS, 4))
    assert not run.ok and run.error and "probe 1/3" in run.error
