"""Where the study model expects a launch's capacity boundary, so the search probes there.

A capacity launch doubles its load from the start until the SLO breaks, then bisects
(:class:`tuner.studies.capacity.Bracket`): about ``2 log2(capacity)`` probes, each a
measured run. Once three probes of the launch are measured, the step costs they imply
(:mod:`tuner.perfmodel`) replay any other concurrency request by request
(:mod:`tuner.perfmodel.simulate`), so the SLO's percentiles can be predicted for every load
inside the bracket. The model's guess is the largest load it expects to meet the SLO; the
search measures it (and, when it holds, the load after it), so a good model brackets the
boundary in two probes where bisection needs several. The model only places probes: every
verdict is still a measured run's, so a wrong guess costs a probe, never a wrong answer.
It stays silent (plain doubling and bisection) for a request-rate search, an SLO key a
replay cannot tell, fewer than three measured probes, or after :data:`MAX_GUIDED` guesses
in one launch.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tuner.bench.workload import Workload
from tuner.studies.capacity import Bracket

__all__ = ["MAX_GUIDED", "model_guess"]

MAX_GUIDED = 4  # a model that keeps missing hands the search back to bisection


def model_guess(
    bracket: Bracket,
    measured: Sequence[Any],
    workload_at: Callable[[float], Workload],
) -> int | None:
    """The load (grid units) the model expects to be the last one meeting the SLO, inside
    the bracket's open interval; None when the model cannot say (see the module docstring).

    Args:
        bracket: The launch's search so far.
        measured: The launch's finished probe trials.
        workload_at: The probe workload at a load (tuner.studies.capacity_run.probe_workload).
    """
    from tuner.perfmodel.fit import calibrate
    from tuner.perfmodel.forecast import MIN_TRIALS
    from tuner.perfmodel.observation import observation_of_trial
    from tuner.perfmodel.simulate import replay

    grid, slo = bracket.grid, bracket.slo
    if grid.by != "concurrency":
        return None
    found = [o for t in measured if (o := observation_of_trial(t)) is not None]
    if len(found) < MIN_TRIALS:
        return None
    context, _ = Counter(o.context for o in found).most_common(1)[0]
    group = [o for o in found if o.context == context]
    if len(group) < MIN_TRIALS:
        return None
    model = calibrate(group)
    template = group[-1].point
    lo, hi = bracket.bounds()
    first, last = lo + 1, (hi - 1) if hi is not None else grid.units(grid.limit)
    if first > last:
        return None

    def meets(units: int) -> bool | None:
        load = workload_at(grid.value(units))
        point = dataclasses.replace(
            template, concurrency=load.concurrency, num_prompts=load.num_prompts
        )
        run = replay(point, model.a, model.b, model.c)
        values = {key: run.metric(key) for key in slo.keys}
        if any(v is None for v in values.values()):
            return None
        return slo.met({k: float(v) for k, v in values.items() if v is not None})

    verdict = meets(first)
    if verdict is None:
        return None  # an SLO key a replay cannot tell
    if not verdict:
        return first  # the boundary is at lo: measuring lo + 1 should close the bracket
    good, bad = first, last + 1
    while bad - good > 1:  # the largest load predicted to meet (latency grows with load)
        mid = (good + bad) // 2
        if meets(mid):
            good = mid
        else:
            bad = mid
    return good
