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
from dataclasses import dataclass, field
from typing import Any

from tuner.bench.workload import Workload
from tuner.studies.capacity import Bracket

__all__ = ["MAX_GUIDED", "Guess", "GuidedSearch", "model_guess"]

MAX_GUIDED = 4  # guesses per launch at most; the first one the measurement contradicts ends them


@dataclass(frozen=True)
class Guess:
    """A load to measure next, and the verdict the model expects of it there.

    Attributes:
        units: The load in grid units.
        meets: Whether the model expects it to meet the SLO (a measured verdict that
            differs shows the model wrong for this launch).
    """

    units: int
    meets: bool


def model_guess(
    bracket: Bracket,
    measured: Sequence[Any],
    workload_at: Callable[[float], Workload],
) -> Guess | None:
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
        return Guess(first, False)  # the boundary is at lo: lo + 1 should close the bracket
    good, bad = first, last + 1
    while bad - good > 1:  # the largest load predicted to meet (latency grows with load)
        mid = (good + bad) // 2
        if meets(mid):
            good = mid
        else:
            bad = mid
    return Guess(good, True)


@dataclass
class GuidedSearch:
    """One launch's search: the bracket, and the model's place in it (the one owner of when
    the model may guess, and of when it has shown itself wrong).

    Attributes:
        bracket: The measured runs per load.
        model: Whether the model may place probes at all.
        measured: The finished probe trials, in order (the model's calibration).
        guided: Probes the model placed so far.
        off: A measured verdict contradicted the model: no more guesses this launch.
        converged_at: Probes measured when the boundary was first bracketed.
    """

    bracket: Bracket
    model: bool = True
    measured: list[Any] = field(default_factory=list)
    guided: int = 0
    off: bool = False
    converged_at: int | None = None

    def next(self, workload_at: Callable[[float], Workload]) -> tuple[int, bool | None]:
        """The load to measure next (grid units), and the verdict the model expects of it
        (None: the search placed it, not the model)."""
        guess = None
        if self.model and not self.off and self.guided < MAX_GUIDED and not self.bracket.converged:
            guess = model_guess(self.bracket, self.measured, workload_at)
        units = guess.units if guess is not None else None
        placed = self.bracket.next_units(units)  # the guess where usable, else the search's
        if guess is not None and placed == guess.units and self.bracket.usable_guess(units):
            self.guided += 1
            return placed, guess.meets
        return placed, None

    def record(
        self, units: int, values: dict[str, float] | None, trial: Any, expected: bool | None
    ) -> None:
        """A measured probe: its run joins the bracket and the calibration; a verdict other
        than the model ``expected`` ends the model's guessing."""
        self.bracket.record(units, values)
        self.measured.append(trial)
        if expected is not None and expected != self.bracket.verdict(units):
            self.off = True
        if self.converged_at is None and self.bracket.converged:
            self.converged_at = len(self.measured)
