"""What every study shares: how a trial is executed, and how results are read.

A study (A/B, sweep, search) builds trials and hands them to a
``TrialRunner``: the trial runner (``tuner.trials.runner``) bound to the
study's store, event callback and run options, with the rules' context
(introspection, model analysis) resolved once per model instead of once per
trial. Options the runner offers (GPU slots, an engine double's command in
tests) pass through it without the study code knowing about them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.studies.space import Constraint

if TYPE_CHECKING:
    from tuner.config import EngineConfig
    from tuner.trials.events import TrialEventCallback
    from tuner.trials.model import Trial
    from tuner.trials.store import TrialStore


@dataclass
class TrialRunner:
    """Runs a study's trials through the trial runner with fixed options.

    Attributes:
        store: Where every trial is recorded.
        on_event: Trial events, for progress displays.
        options: Keyword options of ``run_trial``/``run_workloads`` (python,
            sampler, startup_timeout, extra_env ...).
        command_for: Builds the engine command line per config — engine
            doubles in tests only; production leaves it None (real vLLM).
    """

    store: TrialStore
    on_event: TrialEventCallback | None = None
    options: dict[str, Any] = field(default_factory=dict)
    command_for: Callable[[EngineConfig], list[str]] | None = None
    _contexts: dict[str, Any] = field(default_factory=dict, repr=False)

    async def _kwargs(self, config: EngineConfig) -> dict[str, Any]:
        import asyncio

        from tuner.trials.runner import resolve_context

        kwargs = dict(self.options)
        if "context" not in kwargs:
            # Introspection and model analysis once per model, not once per trial.
            if config.model not in self._contexts:
                python = kwargs.get("python", sys.executable)
                self._contexts[config.model] = await asyncio.to_thread(
                    resolve_context, config.model, python
                )
            kwargs["context"] = self._contexts[config.model]
        if self.command_for is not None:
            kwargs["engine_command"] = self.command_for(config)
        return kwargs

    async def one(self, trial: Trial) -> Trial:
        """Run one trial to a final state (its own engine)."""
        from tuner.trials.runner import run_trial

        kwargs = await self._kwargs(trial.config)
        return await run_trial(trial, self.store, on_event=self.on_event, **kwargs)

    async def many(self, trials: list[Trial]) -> list[Trial]:
        """Run trials of one config on one engine, one workload after another."""
        from tuner.trials.runner import run_workloads

        if not trials:
            return []
        kwargs = await self._kwargs(trials[0].config)
        return await run_workloads(trials, self.store, on_event=self.on_event, **kwargs)


def study_name(kind: str) -> str:
    """A fresh, sortable study name such as ``ab-20261122-021500``."""
    return f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def value_of(trial: Trial, key: str) -> float | None:
    """A numeric result of a finished trial (None when absent or the trial did not finish)."""
    from tuner.trials.model import TrialStatus, metric

    if trial.status is not TrialStatus.DONE:
        return None
    return metric(trial, key)


def meets(trial: Trial, constraints: Iterable[Constraint]) -> bool:
    """True when the trial finished and every SLO constraint holds on its results."""
    from tuner.trials.model import TrialStatus

    if trial.status is not TrialStatus.DONE:
        return False
    return all(c.met(value_of(trial, c.metric)) for c in constraints)


def point_key(trial: Trial) -> str:
    """Identity of a measured point: the same config under the same workload."""
    import json

    return trial.config_id + ":" + json.dumps(trial.workload.to_dict(), sort_keys=True)


def describe_values(values: dict[str, Any]) -> str:
    """``max-num-seqs=64 concurrency=32`` for tables and logs."""
    return " ".join(f"{k}={v}" for k, v in values.items()) or "(base config)"
