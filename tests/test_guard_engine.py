"""The output-drift guard on the real vLLM CPU engine (issue 16's proof).

One engine serves two trials of the demo config (the same config twice: the
second's guard is scored teacher-forced on the first's tokens, through the
runner's own reference lookup) -> **same**. A second engine runs the demo
config with ``dtype=float32`` instead of bfloat16 -> not same: on the random-
weights tiny model the numbers move (mean |Δlogprob| > 0) and near-tied
logits flip some greedy tokens, so vLLM really gives **drifted** (or at least
**close**). Two engine starts: 233 s measured on a shared, loaded 2-core box
(load average ~5), less on an idle one; run under
``flock /tmp/tunelab-engine.lock``. The figures are printed (``-s``) for the
closing note.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.cpu_demo import DEMO_ENGINE_ARGS
from tuner.guard import BUILTIN_PROBES, DEFAULT_GUARD_TOKENS, Verdict
from tuner.lab.study import Study
from tuner.trials.guard_check import ab_guard, guard_of, trial_verdict
from tuner.trials.model import Trial, TrialStatus
from tuner.trials.runner import run_trial, run_workloads
from tuner.trials.store import TrialStore

pytestmark = pytest.mark.engine
WORKLOAD = Workload(input_len=32, output_len=16, num_prompts=8, concurrency=4, warmup_requests=0)


async def test_same_config_is_same_and_float32_is_detected(demo_model_path: Path) -> None:
    store = TrialStore()
    demo = EngineConfig(model=str(demo_model_path), engine=dict(DEMO_ENGINE_ARGS))
    assert DEMO_ENGINE_ARGS["dtype"] == "bfloat16"
    first, again = Trial(demo, WORKLOAD, study="guard"), Trial(demo, WORKLOAD, study="guard")
    await run_workloads([first, again], store)
    f32_config = EngineConfig(model=demo.model, engine={**DEMO_ENGINE_ARGS, "dtype": "float32"})
    f32 = await run_trial(Trial(f32_config, WORKLOAD, study="guard"), store)
    first, again = store.get(first.id), store.get(again.id)
    for t in (first, again, f32):
        assert t.status is TrialStatus.DONE, t.failure_reason
        run = guard_of(t)
        assert run is not None and run.ok, run
        assert len(run.probes) == len(BUILTIN_PROBES)
        assert all(len(p.token_ids) == DEFAULT_GUARD_TOKENS for p in run.probes)
    base = Study(store, "guard").baseline()
    assert base is not None and base.trial.id == first.id
    # The runner teacher-forced the baseline's tokens on the later trials.
    assert guard_of(again).reference == guard_of(f32).reference == first.id  # type: ignore[union-attr]

    same = trial_verdict(first, again)
    assert same is not None and same.verdict is Verdict.SAME, same
    assert same.match_rate == 1.0 and same.mean_abs_dlogprob == 0.0
    assert all(d.forced for d in same.diffs)  # vLLM's prompt_logprobs pass was used

    drift = trial_verdict(first, f32)
    assert drift is not None and drift.verdict in (Verdict.DRIFTED, Verdict.CLOSE), drift
    assert all(d.forced for d in drift.diffs)
    assert drift.mean_abs_dlogprob is not None and drift.mean_abs_dlogprob > 0.0
    line = ab_guard([first], [f32]).summary()
    assert line.startswith(f"outputs: {drift.verdict}")
    print(
        f"\nguard on the CPU engine: same config twice -> {same.summary()} "
        f"(match {same.match_rate:.0%}); dtype float32 vs bfloat16 -> {drift.summary()} "
        f"(match {drift.match_rate:.0%}, first divergence per prompt "
        f"{[d.first_divergence for d in drift.diffs]}); A/B line: {line}; guard seconds "
        f"{[round(guard_of(t).seconds, 2) for t in (first, again, f32)]}"  # type: ignore[union-attr]
    )
