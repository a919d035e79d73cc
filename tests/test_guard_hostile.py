"""The drift guard against hostile servers and hostile stored records (issue 26).

A server that answers the probes with JSON nested 10^5 levels deep, with NaN,
infinite, textual or positive logprobs, or with no tokens at all must give a
failed guard with its reason, never an exception (a RecursionError once left
a finished trial ``interrupted``) and never a "same"/"close" verdict (a NaN
fails every ``>`` test, so the threshold rated it close). The server is the
loopback stub of tests/support/guard_stub.py with its answers replaced.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.guard_stub import GuardStub
from tests.test_guard import BASE, _probe, _run
from tuner.bench.client import RequestRecord
from tuner.bench.metrics import compute_metrics
from tuner.bench.runner import BenchResult
from tuner.bench.server_metrics import ServerSummary
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.guard import GuardRun, GuardSettings, Verdict, compare, run_probes
from tuner.trials.guard_check import guard_of, trial_verdict
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.session import EngineSession
from tuner.trials.store import TrialStore

PROMPTS = ("The capital of France is", "def f(x):")
DEEP = b"[" * 100_000 + b"]" * 100_000


class HostileStub(GuardStub):
    """The guard stub, with each answer passed through ``rewrite`` (greedy, then forced)."""

    def __init__(self, rewrite: Any) -> None:
        super().__init__()
        self.rewrite = rewrite

    def answer(self, payload: dict[str, Any]) -> tuple[int, bytes]:
        status, body = super().answer(payload)
        forced = isinstance(payload.get("prompt"), list)
        return status, self.rewrite(json.loads(body), forced)


def _greedy_logprobs(value: str) -> Any:
    """A rewrite that makes the 2nd greedy logprob ``value`` (raw JSON text)."""

    def rewrite(doc: dict[str, Any], forced: bool) -> bytes:
        if not forced:
            doc["choices"][0]["logprobs"]["token_logprobs"][1] = "@@"
        return json.dumps(doc).replace('"@@"', value).encode()

    return rewrite


def _forced_logprob(value: str) -> Any:
    """A rewrite that makes the last teacher-forced logprob ``value`` (raw JSON text)."""

    def rewrite(doc: dict[str, Any], forced: bool) -> bytes:
        if forced:
            last = doc["choices"][0]["prompt_logprobs"][-1]
            next(iter(last.values()))["logprob"] = "@@"
        return json.dumps(doc).replace('"@@"', value).encode()

    return rewrite


def _probes(stub: GuardStub) -> GuardRun:
    return asyncio.run(run_probes(stub.url, "stub", PROMPTS, 4))


@pytest.mark.parametrize(
    ("rewrite", "words"),
    [
        (lambda doc, forced: DEEP, "nested more than 64 levels"),
        (lambda doc, forced: b'{"choices": ' + DEEP + b"}", "nested more than 64 levels"),
        (lambda doc, forced: DEEP if forced else json.dumps(doc).encode(), "nested more than"),
        (_greedy_logprobs("NaN"), "non-finite logprobs (nan) for generated token 1"),
        (_greedy_logprobs("Infinity"), "non-finite logprobs (inf)"),
        (_greedy_logprobs("-Infinity"), "non-finite logprobs (-inf)"),
        (_greedy_logprobs('"abc"'), "not a number ('abc')"),
        (_greedy_logprobs("null"), "not a number (None)"),
        (_greedy_logprobs("true"), "not a number (True)"),
        (_greedy_logprobs("[0.1]"), "not a number"),
        (_greedy_logprobs("3.5"), "impossible logprob (3.5"),
        (_greedy_logprobs("-1e300"), "impossible logprob"),
        (_greedy_logprobs("1" * 4000), "impossible logprob"),
        (_forced_logprob("NaN"), "non-finite logprobs (nan) for teacher-forced token 3"),
        (_forced_logprob('"x"'), "not a number ('x') for teacher-forced"),
    ],
)
def test_a_hostile_answer_is_a_failed_guard_with_its_reason(rewrite: Any, words: str) -> None:
    with HostileStub(rewrite) as stub:
        run = _probes(stub)
    assert not run.ok
    assert run.error is not None and words in run.error, run.error
    assert run.error.startswith("probe 1/2")
    verdict = compare(run, run)
    assert verdict.verdict is Verdict.UNKNOWN and "guard failed" in verdict.reason


def test_an_answer_without_tokens_is_a_failed_guard() -> None:
    def empty(doc: dict[str, Any], forced: bool) -> bytes:
        doc["choices"][0]["token_ids"] = []
        doc["choices"][0]["logprobs"]["token_logprobs"] = []
        return json.dumps(doc).encode()

    with HostileStub(empty) as stub:
        run = _probes(stub)
    assert run.error is not None and "no generated tokens" in run.error


# -- compare never calls non-numbers agreement ------------------------------------------
NAN = float("nan")


@pytest.mark.parametrize(
    ("lps", "forced", "words"),
    [
        ([-0.1, NAN, -0.3, -0.4], None, "non-finite logprobs (nan)"),
        ([NAN] * 4, [NAN] * 4, "non-finite logprobs (nan)"),
        ([-0.1, -0.2, -0.3, -0.4], [-0.1, math.inf, -0.3, -0.4], "non-finite logprobs (inf)"),
        ([None] * 4, None, "a logprob that is not a number (None)"),
        ([-0.1, -0.2, -0.3, 7.0], None, "an impossible logprob (7.0"),
        ([-0.1, -0.2], None, "2 logprobs for 4 tokens"),
    ],
)
def test_bad_logprobs_are_never_same_or_close(
    lps: list[Any], forced: list[Any] | None, words: str
) -> None:
    cand = _run(_probe("a", [5, 6, 7, 8], lps, forced), BASE.probes[1])
    for base, other, side in ((BASE, cand, "candidate"), (cand, BASE, "baseline")):
        v = compare(base, other)
        assert v.verdict is Verdict.UNKNOWN, (lps, v)
        assert f"the {side}'s guard output is not comparable: probe 1 has {words}" in v.reason
    # Even against itself (bit-identical lists of NaN) it is no agreement.
    assert compare(cand, cand).verdict is Verdict.UNKNOWN


def test_probe_without_tokens_is_not_comparable() -> None:
    empty = _run(_probe("a", [], []), _probe("b", [], []))
    v = compare(empty, empty)
    assert v.verdict is Verdict.UNKNOWN and "no generated tokens" in v.reason


def test_non_finite_thresholds_are_not_comparable() -> None:
    from tuner.guard import Thresholds

    v = compare(BASE, BASE, Thresholds(max_mean_abs_dlogprob=NAN))
    assert v.verdict is Verdict.UNKNOWN and "thresholds" in v.reason


# -- stored records -------------------------------------------------------------------
def _record(**changes: Any) -> dict[str, Any]:
    data = BASE.to_dict()
    data.update(changes)
    return data


def _probe_record(**changes: Any) -> dict[str, Any]:
    data = BASE.to_dict()
    data["probes"][0].update(changes)
    return data


@pytest.mark.parametrize(
    ("record", "words"),
    [
        (_probe_record(logprobs=[-0.1, NAN, -0.3, -0.4]), "non-finite logprobs (nan)"),
        (_probe_record(forced_logprobs=[-math.inf] * 4), "non-finite logprobs (-inf)"),
        (_probe_record(logprobs=[-0.1, -0.2, -0.3, 10**4000]), "impossible logprob"),
        (_probe_record(logprobs=[-0.1]), "1 logprobs for 4 tokens"),
    ],
)
def test_a_stored_record_with_bad_logprobs_is_unknown(record: dict, words: str) -> None:
    base = Trial(EngineConfig(model="m"), Workload(input_len=4, output_len=4, num_prompts=1))
    base.guard = BASE.to_dict()
    cand = Trial(EngineConfig(model="m"), Workload(input_len=4, output_len=4, num_prompts=1))
    cand.guard = record
    for a, b in ((base, cand), (cand, base)):
        v = trial_verdict(a, b)
        assert v is not None and v.verdict is Verdict.UNKNOWN, v
        assert words in v.reason


@pytest.mark.parametrize(
    "record",
    [
        _record(max_tokens=1e999),
        _record(max_tokens="abc"),
        _record(max_tokens=[4]),
        _record(max_tokens=True),
        _record(seconds=NAN),
        _record(seconds="x"),
        _record(model=["m"]),
        _record(thresholds={"max_mean_abs_dlogprob": "x"}),
        _probe_record(token_ids="abc"),
        _probe_record(logprobs=["x"] * 4),
        _probe_record(prompt=None),
    ],
)
def test_a_malformed_stored_record_is_an_unreadable_guard(record: dict) -> None:
    trial = Trial(EngineConfig(model="m"), Workload(input_len=4, output_len=4, num_prompts=1))
    trial.guard = record
    run = guard_of(trial)
    assert run is not None and not run.ok
    assert run.error is not None and run.error.startswith("stored guard record unreadable")


# -- the trial keeps its results ------------------------------------------------------------
def _bench_result(workload: Workload) -> BenchResult:
    records = [
        RequestRecord(4, 4, 1.0 + i, 1.0 + i, [1.01 + i, 1.02 + i, 1.03 + i, 1.04 + i], 4, 1.05 + i)
        for i in range(4)
    ]
    return BenchResult(
        "http://127.0.0.1:1",
        "stub",
        workload,
        compute_metrics(records, 4.0),
        ServerSummary(available=False),
        records,
    )


@pytest.mark.parametrize(
    ("rewrite", "words"),
    [
        (lambda doc, forced: DEEP, "nested more than 64 levels"),
        (_greedy_logprobs("NaN"), "non-finite logprobs"),
    ],
)
def test_a_hostile_guard_answer_leaves_the_trial_done_with_its_results(
    tmp_path: Path, rewrite: Any, words: str
) -> None:
    store = TrialStore(tmp_path / "t.db")
    wl = Workload(input_len=4, output_len=4, num_prompts=4)
    trial = Trial(EngineConfig(model="stub"), wl)
    store.add(trial)
    session = EngineSession(store, None, None, None)
    session.guard = GuardSettings(tokens=4)
    with HostileStub(rewrite) as stub:
        session.engine = SimpleNamespace(url=stub.url)  # type: ignore[assignment]
        asyncio.run(session._record(trial, "stub", _bench_result(wl), {}))
    stored = store.get(trial.id)
    assert stored.status is TrialStatus.DONE
    assert stored.results is not None and stored.objective_value == pytest.approx(4.0)
    assert stored.guard is not None and words in (stored.guard["error"] or "")
    store.close()
