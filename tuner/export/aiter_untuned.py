"""The shapes a trial ran on AITER's default kernels, as AITER's own untuned CSVs (issue 29).

``tunelab export TRIAL --aiter-untuned`` (and every export of a trial that
has any) writes one CSV per kernel family in the schema AITER's tuner for that
family reads (``--untune_file``), and ``BASE.aiter-tune.sh``, which runs each
family's tuner on its CSV where AITER's source tree is and prints the
variable that points AITER at the tuned table, ready for an A/B of the tuned
table against the shipped one. The shapes are the union over the trial's
repeats (the same config in the same study): AITER logs a shape once per
process, so each launch may have logged a few the others did not.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from tuner.engine.aiter_shapes import FAMILIES, UNKNOWN, UntunedShape, UntunedShapes, merge, scan
from tuner.engine.effective import start_lines
from tuner.export.errors import ExportError
from tuner.export.files import check_base_name, write_all
from tuner.export.quoting import comment_text, shell_quote
from tuner.export.render import FORMATS, safe_name
from tuner.trials.model import Trial
from tuner.trials.store import StoreError, TrialNotFound, TrialStore

SCRIPT_SUFFIX = ".aiter-tune.sh"
# Every file an export may write, by role: check_base_name refuses a base whose files
# could be another base's (``prod.aiter-tune`` + ``.sh`` is ``prod``'s tuning script).
SUFFIXES: dict[str, str] = {**FORMATS, "aiter-tune": SCRIPT_SUFFIX}
# A value that goes into a CSV cell: AITER's own spellings only (digits, torch dtypes,
# enum names, True/False), never text a spreadsheet or a shell could read as more.
_CELL = re.compile(r"[A-Za-z0-9_.]+")


@dataclass(frozen=True)
class UntunedExport:
    """The files for one trial's untuned shapes, and what to tell the user about them.

    Attributes:
        trial: The trial exported.
        base: The files' base name (file-name safe).
        shapes: The union of its repeats' untuned shapes.
        files: ``(suffix, text, mode)`` per file: a CSV per family, the tuning script.
        left_out: Shapes no CSV could hold (named).
    """

    trial: Trial
    base: str
    shapes: UntunedShapes
    files: list[tuple[str, str, int]]
    left_out: list[str]

    def notes(self) -> list[str]:
        """What the export prints after the paths."""
        if not self.files:
            return []
        out = [
            f"{self.shapes.summary()}; tune them on the GPU node with {self.base}{SCRIPT_SUFFIX}"
        ]
        out += [f"left out {s}: a value AITER's CSV cannot hold" for s in self.left_out]
        hints = tune_env_hints(self.shapes)
        if hints:
            out.append("or let AITER do it: " + "; ".join(hints))
        return out


def shapes_of(trial: Trial) -> UntunedShapes:
    """A trial's untuned shapes: as stored, else read from its engine log if it is still there
    (a trial stored before tunelab recorded them)."""
    if trial.untuned is not None:
        return UntunedShapes.from_dict(trial.untuned)
    if trial.log_path and Path(trial.log_path).is_file():
        return scan(start_lines(trial.log_path), trial.config.env)
    return UntunedShapes()


def trial_shapes(
    trial_id: str, *, store_path: str | Path | None = None
) -> tuple[Trial, UntunedShapes]:
    """Trial ``trial_id`` and the union of its finished repeats' untuned shapes.

    Raises:
        ExportError: the trial does not exist or the store cannot be read.
    """
    try:
        with TrialStore(store_path) as store:
            trial = store.get(trial_id)
            # The same launches the preset pools (its [results.aiter_untuned]).
            repeats = [t for t in store.repeats_of(trial) if t.id != trial.id]
    except TrialNotFound as exc:
        raise ExportError(str(exc), exit_code=2) from None
    except StoreError as exc:
        raise ExportError(f"cannot read the trial store: {exc}") from None
    return trial, merge([shapes_of(t) for t in (trial, *repeats)])


def render_csv(family: str, shapes: list[UntunedShape]) -> tuple[str, list[str]]:
    """One family's untuned CSV, in AITER's column order; and the shapes it had to leave out.

    A shape lacking one of the family's columns (an older AITER's log did not name
    ``q_dtype_w``) or holding a value outside AITER's spellings is left out, and named.
    """
    fam = FAMILIES.get(family)
    columns = fam.columns if fam else _unknown_columns(shapes)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    left: list[str] = []
    for s in shapes:
        values = dict(s.values)
        row = [values.get(c, "") for c in columns]
        if any(not _CELL.fullmatch(v) for v in row):
            left.append(s.describe())
            continue
        writer.writerow(row)
    return out.getvalue(), left


def _unknown_columns(shapes: list[UntunedShape]) -> tuple[str, ...]:
    names: list[str] = []
    for s in shapes:
        names.extend(k for k, _ in s.values if k not in names)
    return tuple(names)


def csv_suffix(family: str) -> str:
    """``.a8w8_blockscale_untuned_gemm.csv``: AITER's own file name after the export's base."""
    fam = FAMILIES.get(family)
    return "." + (fam.untuned if fam else f"aiter_{UNKNOWN}_untuned_gemm.csv")


def untuned_bundle(
    trial_id: str, name: str | None, *, only: bool, store_path: str | Path | None = None
) -> UntunedExport:
    """The AITER files of trial ``trial_id`` (named ``name``, else ``trial-<id>``).

    Args:
        only: The user asked for these files alone (``--aiter-untuned``): no shape
            is then an error that says why, not an empty export.

    Raises:
        ExportError: no such trial; or ``only`` and nothing to export.
    """
    trial, shapes = trial_shapes(trial_id, store_path=store_path)
    base = safe_name(name or f"trial-{trial.short_id}")
    check_base_name(base, SUFFIXES)
    bundle = untuned_export(trial, shapes, base)
    if only and not bundle.files:
        why = (
            "its engine log is gone and the shapes were not recorded"
            if trial.untuned is None and not (trial.log_path and Path(trial.log_path).is_file())
            else "its engine logged no AITER shape that fell back to a default kernel"
        )
        raise ExportError(
            f"trial {trial.short_id}: nothing to export: {why}",
            fix="AITER logs these on ROCm with VLLM_ROCM_USE_AITER=1; a CPU or CUDA engine "
            "has none",
            exit_code=2,
        )
    return bundle


def write_bundle(out: str | Path, bundle: UntunedExport, force: bool) -> list[Path]:
    """Writes the bundle's files into ``out``, all or none (``tuner.export.files.write_all``).

    Raises:
        ExportError: a file exists (without ``force``), or writing failed.
    """
    directory = Path(out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {directory}: {exc.strerror or exc}") from None
    files: list[tuple[Path, str | bytes, int]] = [
        (directory / f"{bundle.base}{suffix}", text, mode) for suffix, text, mode in bundle.files
    ]
    return write_all(files, force=force)


def untuned_export(trial: Trial, shapes: UntunedShapes, base: str) -> UntunedExport:
    """The CSVs and the tuning script for ``shapes`` (no file when there is no shape)."""
    families: dict[str, list[UntunedShape]] = {}
    for s in shapes.shapes:
        families.setdefault(s.family, []).append(s)
    files: list[tuple[str, str, int]] = []
    left: list[str] = []
    for family, group in families.items():
        text, dropped = render_csv(family, group)
        left.extend(dropped)
        if len(group) > len(dropped):
            files.append((csv_suffix(family), text, 0o644))
    if files:
        script = render_script(trial, base, [f for f in families if f != UNKNOWN])
        files.append((SCRIPT_SUFFIX, script, 0o755))
    return UntunedExport(trial, base, shapes, files, left)


def render_script(trial: Trial, base: str, families: list[str]) -> str:
    """Runs each family's AITER tuner on its CSV; prints how to A/B the tuned tables.

    The tuners need AITER's source tree (``csrc/``), which a wheel install lacks:
    ``AITER_ROOT`` names it, else the tree the installed ``aiter`` package sits in.
    Only fixed names are written: ``base`` is file-name safe (letters, digits,
    ``._-``) and the rest are AITER's own names.
    """
    lines = [
        "#!/usr/bin/env bash",
        f"# AITER tuning for the shapes trial {comment_text(trial.id, 80)} ran on default kernels.",
        "# Generated by tunelab (issue 29). Run it on the GPU node.",
        "set -euo pipefail",
        'here="$(cd "$(dirname "$0")" && pwd)"',
        "root=\"${AITER_ROOT:-$(python3 -c 'import aiter, os; "
        "print(os.path.dirname(os.path.dirname(aiter.__file__)))')}\"",
        '[ -d "$root/csrc" ] || { echo "no AITER source tree (csrc/) at $root: set AITER_ROOT to '
        'a checkout of ROCm/aiter" >&2; exit 2; }',
        'cd "$root"',
    ]
    sets: list[str] = []
    for family in families:
        fam = FAMILIES[family]
        tuned = f"{base}.{fam.table}.csv"
        extra = f" {fam.tuner_args}" if fam.tuner_args else ""
        lines.append(
            f'python3 {shell_quote(fam.tuner)} --untune_file "$here/{base}{csv_suffix(family)}" '
            f'--tune_file "$here/{tuned}"{extra}'
        )
        sets.append(f"--b-set {fam.env}=$here/{tuned} --allow-env {fam.env}")
    preset = f"$here/{base}.toml"
    lines += [
        'echo "tuned tables written next to the CSVs; A/B them against the shipped ones:"',
        f'echo "  tunelab ab --a-preset {preset} --b-preset {preset} {" ".join(sets)}"',
    ]
    return "\n".join(lines) + "\n"


def tune_env_hints(shapes: UntunedShapes) -> list[str]:
    """AITER's own switches for the families seen (bf16: ``AITER_TUNE_GEMM=1``), with what
    each does: the user may prefer them to the exported CSVs."""
    seen = {s.family for s in shapes.shapes}
    return [
        f"{fam.tune_env}=1 {fam.tune_note} ({fam.name})"
        for fam in FAMILIES.values()
        if fam.name in seen and fam.tune_env
    ]
