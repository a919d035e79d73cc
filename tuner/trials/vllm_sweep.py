"""A study written in `vllm bench sweep`'s layout, so vLLM's own plot tools read it.

`vllm bench sweep serve` writes one directory per parameter combination,
named ``SERVE--<serve params>-BENCH--<bench params>``, holding ``run=N.json``
(one `vllm bench serve` result each, with the combination's parameters as
top-level keys) and ``summary.json`` (the list of those runs); the experiment
directory holds ``summary.csv`` over every run. ``vllm bench sweep plot`` and
``plot_pareto`` read ``**/summary.json`` and group and filter on those
top-level keys (vllm/benchmarks/sweep/serve.py, plot.py).

tunelab's trials already carry `vllm bench serve`'s result keys, so a trial is
one run. The combination of a run is what varies across the exported trials:
engine knobs as underscore keys (``max_num_seqs``, as vLLM's serve params are
spelled in JSON), environment knobs under their own names, and the workload's
bench parameters (``max_concurrency``, ``request_rate``, ``num_prompts``,
``random_input_len``, ``random_output_len``). A knob one trial sets and
another leaves to vLLM is written as ``"default"`` for the latter, so every
run has every key (vLLM's grouping fails on a missing one); where the knob
catalogue knows vLLM's default (``tensor_parallel_size`` 1), that value is
written instead, so vLLM's ``plot_pareto`` can still read it as a number. Trials with the
same combination are the repeats ``run=0, 1, ...`` in the order they ran.
Only finished, unpruned trials are runs; the rest are counted, not written.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner import knobs
from tuner.errors import TunelabError
from tuner.trials.model import PRUNED_TAG, Trial, TrialStatus

DEFAULT = "default"
_DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "errors")


@dataclass
class SweepExport:
    """What an export wrote.

    Attributes:
        root: The experiment directory.
        combinations: Directory name → number of runs in it.
        skipped: Trial id → why it is not a run (failed, pruned, no result).
        serve_keys: The engine/env keys that vary (the ``SERVE-`` part).
        bench_keys: The workload keys that vary (the ``BENCH-`` part).
    """

    root: Path
    combinations: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    serve_keys: list[str] = field(default_factory=list)
    bench_keys: list[str] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return sum(self.combinations.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "runs": self.runs,
            "combinations": dict(self.combinations),
            "skipped": dict(self.skipped),
            "serve_keys": list(self.serve_keys),
            "bench_keys": list(self.bench_keys),
        }


class SweepExportError(TunelabError, ValueError):
    """Nothing to export, or the directory cannot take it (bad input: exit 2)."""


def serve_params(trial: Trial) -> dict[str, Any]:
    """The trial's knobs as `vllm bench sweep` serve params: engine args with underscores."""
    out: dict[str, Any] = {k.replace("-", "_"): v for k, v in trial.config.engine.items()}
    out.update(trial.config.env)
    return out


def unset_value(key: str) -> Any:
    """What a run that leaves ``key`` to vLLM holds: vLLM's default if known, else "default"."""
    knob = knobs.get(key.replace("_", "-")) or knobs.get(key)
    if knob is not None and knob.default is not None:
        return knob.default
    return DEFAULT


def bench_params(trial: Trial) -> dict[str, Any]:
    """The workload as `vllm bench serve` argument names."""
    wl = trial.workload
    rate: Any = "inf" if math.isinf(wl.request_rate) else wl.request_rate
    return {
        "max_concurrency": wl.concurrency,
        "request_rate": rate,
        "num_prompts": wl.num_prompts,
        "random_input_len": wl.input_len,
        "random_output_len": wl.output_len,
    }


def skip_reason(trial: Trial) -> str | None:
    """Why a trial is not a run of the export, or None when it is one."""
    if trial.status is not TrialStatus.DONE:
        return str(trial.status)
    if isinstance(trial.tags.get(PRUNED_TAG), dict):
        return "pruned (stopped early: a partial measurement)"
    if not trial.results:
        return "no result"
    return None


def _varying(rows: Sequence[dict[str, Any]]) -> list[str]:
    keys = sorted({k for row in rows for k in row})
    return [k for k in keys if len({json.dumps(row.get(k, DEFAULT)) for row in rows}) > 1]


def _part(values: dict[str, Any]) -> str:
    # ParameterSweepItem.as_text(sep="-") and sanitize_filename, as vLLM names them.
    text = "-".join(f"{k}={v}" for k, v in values.items())
    return text.replace("/", "_").replace("..", "__").strip("'").strip('"')


def combination_name(serve: dict[str, Any], bench: dict[str, Any]) -> str:
    """The directory name vLLM gives this combination (``SERVE--k=v-BENCH--k=v``)."""
    parts: list[str] = []
    if serve:
        parts += ["SERVE-", _part(serve)]
    if bench:
        parts += ["BENCH-", _part(bench)]
    return "-".join(parts) or "default"


def run_record(
    trial: Trial, serve: dict[str, Any], bench: dict[str, Any], number: int
) -> dict[str, Any]:
    """One ``run=N.json``: the trial's result, its combination's keys and a tunelab block."""
    results = {k: v for k, v in (trial.results or {}).items() if k not in _DETAIL_KEYS}
    own = results.pop("tunelab", None)
    block = dict(own) if isinstance(own, dict) else {}
    block.update(
        {
            "trial_id": trial.id,
            "study": trial.study,
            "arm": trial.arm,
            "repeat": trial.repeat,
            "config_id": trial.config.config_id,
            "vllm_version": trial.vllm_version,
            "platform": trial.platform,
            "gpu_names": list(trial.gpu_names),
            "attention_backend": trial.backend_actual,
        }
    )
    return {**results, "run_number": number, **serve, **bench, "tunelab": block}


def write_sweep(trials: Sequence[Trial], out: Path, *, force: bool = False) -> SweepExport:
    """Write ``trials`` under ``out`` in `vllm bench sweep`'s layout.

    The directory is built beside ``out`` and moved into place in one rename,
    so a failure leaves no half-written export.

    Raises:
        SweepExportError: No finished trial, or ``out`` exists and is not empty
            (without ``force``).
    """
    runs = [t for t in trials if skip_reason(t) is None]
    report = SweepExport(root=out)
    report.skipped = {t.id: r for t in trials if (r := skip_reason(t)) is not None}
    if not runs:
        raise SweepExportError(
            "no finished trial to export", fix="run a study first, or name one with --study"
        )
    if out.exists() and any(out.iterdir()) and not force:
        raise SweepExportError(f"{out} exists and is not empty", fix="pass --force to replace it")
    runs.sort(key=lambda t: (t.started_at or t.created_at, t.created_at))
    serves = [serve_params(t) for t in runs]
    benches = [bench_params(t) for t in runs]
    report.serve_keys, report.bench_keys = _varying(serves), _varying(benches)
    groups: dict[str, list[dict[str, Any]]] = {}
    for trial, serve_all, bench_all in zip(runs, serves, benches, strict=True):
        serve = {k: serve_all.get(k, unset_value(k)) for k in report.serve_keys}
        bench = {k: bench_all[k] for k in report.bench_keys}
        name = combination_name(serve, bench)
        group = groups.setdefault(name, [])
        group.append(run_record(trial, serve, bench, len(group)))
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        everything: list[dict[str, Any]] = []
        for name, records in groups.items():
            folder = staging / name
            folder.mkdir(parents=True, exist_ok=True)
            for record in records:
                _dump(folder / f"run={record['run_number']}.json", record)
            _dump(folder / "summary.json", records)
            everything += records
            report.combinations[name] = len(records)
        _write_csv(staging / "summary.csv", everything)
        if out.exists():
            _replace(out, staging)
        else:
            os.replace(staging, out)
    except BaseException:
        _remove(staging)
        raise
    return report


def _dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=4, default=str) + "\n", encoding="utf-8")


def _write_csv(path: Path, records: list[dict[str, Any]]) -> None:
    # pandas' DataFrame.from_records(...).to_csv() as vLLM writes it: an index column,
    # then every key any run has, nested values as their JSON text.
    keys: list[str] = []
    for record in records:
        keys += [k for k in record if k not in keys]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["", *keys])
        for i, record in enumerate(records):
            writer.writerow([i, *(_cell(record.get(k)) for k in keys)])


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return value


def _replace(out: Path, staging: Path) -> None:
    old = out.with_name(f".{out.name}.old")
    _remove(old)
    os.replace(out, old)
    os.replace(staging, out)
    _remove(old)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()
