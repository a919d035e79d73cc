"""Output-drift guard (issue 16 part 1): does a tuned config still give the same answers?

After a trial's measured run, on the same engine, a few probe prompts are run
with greedy decoding and logprobs (:func:`run_probes`); :func:`compare` judges
a trial's :class:`GuardRun` against its study baseline's: **same**, **close**
or **drifted**. :class:`GuardSettings` says which probes, how many
tokens and which thresholds (docs/guard.md). The core never imports Textual, torch or vLLM.

``run_probes`` is loaded on first use (PEP 562): reading verdicts (the TUI at
start-up, the report, ``tunelab show``) must not load the HTTP client stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.guard.compare import Thresholds, compare
from tuner.guard.model import GuardRun, GuardVerdict, ProbeResult, PromptDiff, Verdict
from tuner.guard.probes import BUILTIN_PROBES, DEFAULT_GUARD_TOKENS
from tuner.guard.settings import GuardSettings, GuardSettingsError, load_prompts

__all__ = [
    "BUILTIN_PROBES",
    "DEFAULT_GUARD_TOKENS",
    "GuardRun",
    "GuardSettings",
    "GuardSettingsError",
    "GuardVerdict",
    "ProbeResult",
    "PromptDiff",
    "Thresholds",
    "Verdict",
    "compare",
    "load_prompts",
    "run_probes",
]

if TYPE_CHECKING:
    from tuner.guard.run import run_probes


def __getattr__(name: str) -> Any:
    if name == "run_probes":
        # Deferred: the guard's HTTP client loads only when probes run.
        from tuner.guard.run import run_probes

        return run_probes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
