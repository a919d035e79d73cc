"""Trials out of the store: JSON for programs, CSV for spreadsheets.

JSON is the full trial (what ``tunelab show --json`` prints, in a list).
CSV is one flat row per trial: identity and state, the headline metrics in
vLLM's key names, telemetry, and one ``set:KEY`` column per knob any of the
trials sets, so a sweep reads as a table without post-processing.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from tuner.foreign_text import clean
from tuner.trials.model import Trial, metric

# Headline metrics, in the order a reader scans them.
METRIC_COLUMNS = (
    "completed",
    "failed",
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "request_goodput",
)
TELEMETRY_COLUMNS = ("peak_vram_bytes", "mean_power_w", "energy_j", "tokens_per_joule")
BASE_COLUMNS = (
    "id",
    "study",
    "status",
    "config_id",
    "model",
    "arm",
    "repeat",
    "objective",
    "objective_value",
    "input_len",
    "output_len",
    "num_prompts",
    "concurrency",
    "request_rate",
    "backend_requested",
    "backend_actual",
    "startup_seconds",
    "vllm_version",
    "platform",
    "gpu_slot",
    "created_at",
    "finished_at",
    "failure_reason",
    "log_path",
)


def to_json(trials: Sequence[Trial]) -> str:
    """The trials as a JSON array (non-finite numbers written as strings, so it stays valid JSON)."""
    return json.dumps([_finite(t.to_dict()) for t in trials], indent=1)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def csv_row(trial: Trial, knob_keys: Sequence[str]) -> dict[str, Any]:
    """One trial as a flat dict for CSV."""
    wl = trial.workload
    row: dict[str, Any] = {
        "id": trial.id,
        "study": trial.study,
        "status": str(trial.status),
        "config_id": trial.config_id,
        "model": trial.config.model,
        "arm": trial.arm,
        "repeat": trial.repeat,
        "objective": trial.objective,
        "objective_value": trial.objective_value,
        "input_len": wl.input_len,
        "output_len": wl.output_len,
        "num_prompts": wl.num_prompts,
        "concurrency": wl.concurrency,
        "request_rate": "inf" if math.isinf(wl.request_rate) else wl.request_rate,
        "backend_requested": trial.backend_requested,
        "backend_actual": trial.backend_actual,
        "startup_seconds": trial.startup_seconds,
        "vllm_version": trial.vllm_version,
        "platform": trial.platform,
        "gpu_slot": trial.gpu_slot,
        "created_at": trial.created_at,
        "finished_at": trial.finished_at,
        "failure_reason": trial.failure_reason,
        "log_path": trial.log_path,
    }
    for key in METRIC_COLUMNS + TELEMETRY_COLUMNS:
        row[key] = metric(trial, key)
    for key in knob_keys:
        value = trial.config.get(key)
        row[f"set:{key}"] = json.dumps(value) if isinstance(value, dict | list) else value
    return row


# A cell starting with one of these is a formula to a spreadsheet (OWASP "CSV Injection":
# = + - @, tab and carriage return; the full-width forms too, which some locales accept).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """``value`` safe for a CSV cell: numbers stay numbers, text is defused.

    Text (a study name, a knob value, a failure reason: foreign) is cleaned of
    terminal escapes, control and bidi characters (tuner.foreign_text), and a
    text that a spreadsheet would run as a formula gets OWASP's leading ``'``,
    unless it is a plain number written as text (``-1``).
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        return value
    text = clean(value)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def to_csv(trials: Sequence[Trial]) -> str:
    """The trials as CSV text with a header row (empty cells for missing values)."""
    knob_keys = sorted({k for t in trials for k in (*t.config.env, *t.config.engine)})
    header = [*BASE_COLUMNS, *METRIC_COLUMNS, *TELEMETRY_COLUMNS, *(f"set:{k}" for k in knob_keys)]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(name) for name in header])
    for trial in trials:
        row = csv_row(trial, knob_keys)
        writer.writerow([csv_cell(row.get(name)) for name in header])
    return buf.getvalue()
