"""Run, A/B and sweep entry points with the options both faces give them.

The TUI's jobs and the CLI's commands start trials and studies through these
functions, so the A/B a user starts from either face runs the same schedule
(:data:`AB_REPEATS` launches per arm by default) and is judged by the same
report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.guard.settings import GuardSettings
from tuner.lab import capacity as lab_capacity
from tuner.lab.execute import execute
from tuner.lab.plans import ABPlan, CapacityPlan, Hooks, SweepPlan
from tuner.model import ModelInfo
from tuner.rules import Target
from tuner.studies.ab import ABReport
from tuner.studies.capacity import CapacityReport
from tuner.studies.slo import SLO
from tuner.studies.space import Param, parse_param
from tuner.studies.sweep import SweepReport
from tuner.telemetry.sampler import Sampler
from tuner.trials.context import RunContext
from tuner.trials.events import TrialEventCallback
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore

if TYPE_CHECKING:
    from tuner.studies.executor import TrialRunner

# n=2 gives 1 degree of freedom: intervals too wide to name a winner.
AB_REPEATS = 3

__all__ = [
    "AB_REPEATS",
    "GuardSettings",
    "Param",
    "RunOptions",
    "ab",
    "guard_settings",
    "parse_param",
    "runner",
    "sweep",
]


@dataclass
class RunOptions:
    """How trials are run here: the engine's interpreter, patience, what the rules judge against.

    Attributes:
        python: Interpreter that runs vLLM.
        startup_timeout: Seconds an engine may take to become healthy.
        target: The rules' target (None: resolved per model by the trial runner).
        model_info: The analyzed model for the rules (with ``target``).
        sampler: A running telemetry sampler for the trial's GPU window, if any.
        command_for: Builds a replacement engine command (engine doubles in tests only).
        guard: The output-drift guard after each measured run (``--guard-prompts``,
            ``--guard-tokens``; tuner.guard.settings): probes, tokens, thresholds.
        client_process: Each benchmark client in a process of its own (True under
            a UI: its GIL then delays no read); None leaves it to the runner
            (a process when trials run side by side on GPU slots).
    """

    python: str = sys.executable
    startup_timeout: float = 600.0
    target: Target | None = None
    model_info: ModelInfo | None = None
    sampler: Sampler | None = None
    command_for: Callable[[EngineConfig], list[str]] | None = field(default=None, repr=False)
    guard: GuardSettings = field(default_factory=GuardSettings)
    client_process: bool | None = None


def guard_settings(
    prompts_file: Path | None = None, tokens: int | None = None, *, enabled: bool = True
) -> GuardSettings:
    """The guard the user asked for on a face (``--guard-prompts FILE``, ``--guard-tokens N``).

    The prompts file is read and checked here, before any engine starts, so
    every trial of the run asks the same probes.

    Raises:
        GuardSettingsError: (a TunelabError: message + fix) a bad file or token count.
    """
    if tokens is None:
        return GuardSettings(enabled=enabled, prompts_file=prompts_file)
    return GuardSettings(enabled=enabled, prompts_file=prompts_file, tokens=tokens)


def runner(store: TrialStore, options: RunOptions, on_event: TrialEventCallback) -> TrialRunner:
    """The studies' trial runner with ``options``."""
    # The executor loads the engine, benchmark and guard stack (~0.5 s): only when a
    # job starts, never at the TUI's start-up.
    from tuner.studies.executor import TrialRunner

    kwargs: dict[str, object] = {
        "python": options.python,
        "startup_timeout": options.startup_timeout,
        "guard": options.guard,
    }
    if options.target is not None:
        kwargs["context"] = RunContext(options.target, options.model_info, [])
    if options.sampler is not None:
        kwargs["sampler"] = options.sampler
    if options.client_process is not None:
        kwargs["client_process"] = options.client_process
    return TrialRunner(store, on_event=on_event, options=kwargs, command_for=options.command_for)


async def ab(
    a: EngineConfig,
    b: EngineConfig,
    workload: Workload,
    trial_runner: TrialRunner,
    *,
    study: str,
    repeats: int = AB_REPEATS,
    on_trial: Callable[[Trial], None] | None = None,
    profile: bool = False,
) -> ABReport:
    """An A/B of ``a`` (baseline) against ``b``, counterbalanced; its report is the verdict.

    ``profile``: each arm's first launch is profiled after its measured run (issue 29).
    """
    plan = ABPlan(a, b, workload, study, repeats=repeats, profile=profile)
    return await execute(plan, trial_runner, Hooks(on_trial=on_trial))


async def sweep(
    config: EngineConfig,
    workload: Workload,
    param: Param,
    trial_runner: TrialRunner,
    *,
    study: str,
    on_trial: Callable[[Trial], None] | None = None,
) -> SweepReport:
    """One knob over its values."""
    plan = SweepPlan(config, workload, (param,), study)
    return await execute(plan, trial_runner, Hooks(on_trial=on_trial))


async def capacity(
    config: EngineConfig,
    workload: Workload,
    slo: SLO,
    trial_runner: TrialRunner,
    *,
    study: str,
    on_trial: Callable[[Trial], None] | None = None,
) -> CapacityReport:
    """The capacity of ``config`` at ``slo`` by concurrency, over the default launches and probes
    (the TUI's ``k``; ``tunelab capacity`` builds the same plan with its options).

    ``on_trial`` gets each probe trial as it ends (done, failed or skipped), as
    the A/B and sweep entry points give theirs, so a face lists them at once.
    """
    plan = CapacityPlan(
        config, lab_capacity.probe_base(workload, slo), slo, lab_capacity.grid(), study
    )
    report = await execute(plan, trial_runner, Hooks(on_trial=on_trial))
    assert isinstance(report, CapacityReport)  # one config: neither an A/B nor a sweep
    return report
