"""Output-drift guard (issue 16 part 1): does a tuned config still give the same answers?

After a trial's measured run, on the same engine, a few probe prompts are run
with greedy decoding and logprobs (:func:`run_probes`); :func:`compare` judges
a trial's :class:`GuardRun` against its study baseline's: **same**, **close**
or **drifted**. :class:`GuardSettings` says which probes, how many
tokens and which thresholds (docs/guard.md). The core never imports Textual, torch or vLLM.
"""

from tuner.guard.compare import Thresholds, compare
from tuner.guard.model import GuardRun, GuardVerdict, ProbeResult, PromptDiff, Verdict
from tuner.guard.probes import BUILTIN_PROBES, DEFAULT_GUARD_TOKENS
from tuner.guard.run import run_probes
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
