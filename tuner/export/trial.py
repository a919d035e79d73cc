"""A stored trial as a preset: the measured config with its workload, results and provenance.

Export of a trial must carry what was measured, how noisy it was and which
trial it was, so a preset found later can be traced back. This adapter reads
the trial store (``tuner.trials.store``); when that package is not installed
the import fails and ``tunelab export TRIAL`` says the store is unavailable.
"""

from __future__ import annotations

from tuner.trials import store as _store  # noqa: F401  (ImportError: store not available)
from tuner.export.errors import ExportError
from tuner.export.preset import Preset


def preset_from_trial(trial_id: str) -> Preset:
    """The preset for trial ``trial_id``.

    Raises:
        ExportError: when the trial does not exist or has no config.
    """
    raise ExportError(f"cannot export trial {trial_id!r}: the trial store's reader is not wired yet")
