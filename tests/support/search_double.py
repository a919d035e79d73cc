"""One `tune` search on the study engine double, as the search tests run it.

The space every search test of the study model uses (max-num-seqs × concurrency, 1…32 each,
``p99_ttft_ms<=100``, 10 ms token gaps), run through the product's ``run_search``, trial
runner and store; the tests then read what was stored, told and reported.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.study_cli import double_command
from tuner.bench.workload import Workload
from tuner.config import EngineConfig
from tuner.rules import Target
from tuner.studies.executor import TrialRunner
from tuner.studies.search import SearchReport, run_search
from tuner.studies.space import Space, parse_constraint, parse_param
from tuner.trials.context import RunContext
from tuner.trials.model import Trial
from tuner.trials.store import TrialStore


@dataclass
class DoubleSearch:
    """What one search left: its report, its stored trials, its storage and its events."""

    report: SearchReport
    trials: list[Trial]
    url: str
    space: Space
    events: list[Any]


def search_on_double(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, n_trials: int, seed: int, **kw: Any
) -> DoubleSearch:
    """Run the study ``s`` on the double; ``kw`` goes to ``run_search`` (``propose=False``...)."""
    monkeypatch.setenv("DOUBLE_TOKEN_MS", "10")
    monkeypatch.setenv("TUNELAB_HOME", str(tmp_path / "home"))
    space = Space([parse_param("max-num-seqs=1,2,4,8,16,32"),
                   parse_param("concurrency=1,2,4,8,16,32")],
                  constraints=[parse_constraint("p99_ttft_ms<=100")])  # fmt: skip
    load = Workload(input_len=16, output_len=16, num_prompts=32, warmup_requests=0)
    context = RunContext(Target(note="study engine double"), None, [])
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    events: list[Any] = []
    with TrialStore(tmp_path / "trials.db") as store:
        runner = TrialRunner(store, events.append, {"startup_timeout": 60, "context": context,
                                                    "guard": False}, double_command)  # fmt: skip
        report = asyncio.run(run_search(EngineConfig(model="engine-double"), load, space, runner,
                                        n_trials=n_trials, study="s", storage=url, seed=seed,
                                        prune=False, **kw))  # fmt: skip
        trials = store.list(study="s")
    return DoubleSearch(report, trials, url, space, events)
