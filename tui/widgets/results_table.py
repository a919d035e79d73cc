"""The results table: every trial of the study, baseline marked, deltas against it.

Rows come from the trial store; the deltas are plain relative differences of
single trials (the noise-aware verdict lives in the compare view, which reads
``tuner.studies.stats``' rows through ``tuner.lab.reports``). Clicking a header,
or pressing ``o``, sorts.

The metric columns come before the knob column, which is cut with an
ellipsis, so at 80 columns the numbers stay on screen (issue 13). Every cell
is a ``Text``, never markup: a knob value such as ``[/]x`` is shown as typed.
Where most responses of a trial arrived in one piece the chunk metrics (ITL)
are marked ``⚠`` — the figure describes a starved server, not streaming
(``tuner.bench.metrics.delivery_warning``, issue 13 B9). The guard column is
the output-drift guard's verdict against the study baseline, as the core
gives it to every face (``tuner.lab.study.Study.guards``, issue 16). A trial
measured while other processes or the hypervisor took the CPU has ``⚑``
after its status (``tuner.bench.host_noise.host_note``, issue 17).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import DataTable

from tuner.bench.host_noise import host_note
from tuner.foreign_text import one_line
from tuner.lab.reports import CapacityStep, ProbeView, probe_view
from tuner.lab.study import knob_changes
from tuner.trials.model import metric

if TYPE_CHECKING:
    from tuner.trials.guard_check import TrialGuard

# (column key, label, metric, format, higher is better)
COLUMNS: tuple[tuple[str, str, str | None, str, bool], ...] = (
    ("mark", " ", None, "", True),
    ("id", "trial", None, "", True),
    ("status", "status", None, "", True),
    ("tok_s", "tok/s", "output_throughput", ".0f", True),
    ("d_tok_s", "Δ", None, "", True),
    ("ttft", "TTFT p99", "p99_ttft_ms", ".1f", False),
    ("d_ttft", "Δ", None, "", True),
    ("itl", "ITL p99", "p99_itl_ms", ".1f", False),
    ("d_itl", "Δ", None, "", True),
    ("req_s", "req/s", "request_throughput", ".2f", True),
    ("guard", "guard", None, "", True),
    ("config", "config", None, "", True),
)
MIN_CONFIG_WIDTH = 16
WIDE_FROM = 120  # from this many columns every column is shown
ALL_KEYS = tuple(key for key, *_ in COLUMNS)
NARROW_KEYS = ("mark", "id", "status", "tok_s", "d_tok_s", "ttft", "d_ttft", "config")
# What each column's cells take at most (status: "interrupted ⚑"); config takes the rest.
WIDTHS = {
    "mark": 1,
    "id": 8,
    "status": 13,
    "tok_s": 6,
    "d_tok_s": 7,
    "ttft": 8,
    "d_ttft": 9,
    "itl": 9,
    "d_itl": 7,
    "req_s": 6,
    "guard": 8,
}
CHUNK_METRICS = ("itl",)  # columns that are meaningless when responses came in one piece
ONE_PIECE = "⚠"
BUSY_HOST = "⚑"
# A capacity launch's row key: its first probe's id after this prefix (no trial has it).
STEP_KEY = "capacity-step:"
_METRIC_KEYS = frozenset(key for key, _l, name, _f, _h in COLUMNS if name)
SORTABLE = ("tok_s", "ttft", "itl", "req_s", "id", "status")
GUARD_STYLE = {"same": "green", "close": "cyan", "drifted": "bold red", "baseline": "bold"}


def guard_cell(guard: TrialGuard | None) -> Text:
    """The guard's label for a trial (``same``, ``close``, ``drifted``, ``baseline``, ``—``)."""
    label = guard.label() if guard is not None else "—"
    return Text(label, style=GUARD_STYLE.get(label, "dim"))


def knob_diff(trial: Any, baseline: Any | None) -> str:
    """The knobs where ``trial`` differs from the baseline (or all it sets)."""
    cfg = trial.config
    values = {**cfg.env, **cfg.engine}
    if baseline is not None and baseline is not trial:
        changes = knob_changes(baseline, trial)
        if not changes:
            return "= baseline"
        return " ".join(f"{c.key}={c.value}" for c in changes)
    tag = trial.arm_label
    return (tag + " " if tag else "") + (f"{len(values)} knobs" if values else "defaults")


def delta(value: float | None, base: float | None, higher_better: bool) -> Text:
    """`+12.3%` coloured by whether it is better."""
    if value is None or base is None or base == 0:
        return Text("")
    rel = (value - base) / abs(base)
    better = rel > 0 if higher_better else rel < 0
    style = "green" if better else "red" if rel else "dim"
    return Text(f"{rel:+.1%}", style=style)


class ResultsTable(DataTable[Any]):
    """All trials, newest last; the columns the width holds, each row's full story in ``details``."""

    guards: dict[str, TrialGuard]  # trial id -> the guard's verdict, as last shown
    details: dict[str, Text]  # row key -> the line the detail pane shows for it
    shown: tuple[str, ...] = ()  # the column keys on screen

    def on_mount(self) -> None:
        self.guards = {}
        self.details = {}
        self.cursor_type = "row"
        self.zebra_stripes = True

    def _columns(self, keys: tuple[str, ...]) -> None:
        if keys == self.shown:
            return
        self.clear(columns=True)
        for key, label, *_ in COLUMNS:
            if key in keys:
                self.add_column(label, key=key)
        self.shown = keys

    def show(
        self,
        trials: Sequence[Any],
        baseline_id: str | None,
        guards: Mapping[str, TrialGuard] | None = None,
        steps: Sequence[CapacityStep] = (),
        width: int | None = None,
    ) -> None:
        """Fill the table; the baseline row is marked ★ and deltas are against it.

        ``guards``: each trial's output-guard verdict (``Study.guards``); none: ``—``.
        ``steps``: the study's capacity launches (``Study.capacity_steps``): each
        launch gets a row with its capacity above its first probe, and a probe row
        shows its load and ✓/✗, never a Δ against a baseline at another load.
        ``width``: the columns to lay out for (None: the table's own); :func:`layout`
        picks what fits and the config column gets the rest (:func:`config_room`).
        """
        width = width or self.size.width or self.app.size.width
        keys = layout(width)
        self._columns(keys)
        self.clear()
        self.details = {}
        baseline = next((t for t in trials if t.id == baseline_id), None)
        self.guards = guards = dict(guards or {})
        heads = {step.trial_ids[0]: step for step in steps}
        rows: list[tuple[dict[str, Any], str, Text]] = []
        for trial in trials:
            step = heads.get(trial.id)
            if step is not None:
                rows.append((step_cells(step), STEP_KEY + trial.id, Text(step.summary())))
            probe = probe_view(trial)
            if probe is not None:
                rows.append(
                    (probe_cells(probe), trial.id, Text(f"{trial.short_id} {probe.line()}"))
                )
                continue
            guard = guards.get(trial.id)
            rows.append(
                (
                    trial_cells(trial, baseline, guard),
                    trial.id,
                    trial_detail(trial, baseline, guard),
                )
            )
        # The table's own width once laid out (the screen's less its padding before).
        avail = min(width, self.size.width) if self.size.width else width - 2
        room = config_room(avail, keys, [c for c, _k, _d in rows])
        for cells, key, detail in rows:
            cells["config"] = cut(cells["config"], room)
            self.add_row(*(cells[k] for k in self.shown), key=key)
            self.details[key] = detail


def layout(width: int) -> tuple[str, ...]:
    """The column keys that fit ``width``.

    Below :data:`WIDE_FROM` columns ITL, req/s and the guard give way (the
    detail pane under the table shows them for the highlighted row).
    """
    return ALL_KEYS if width >= WIDE_FROM else NARROW_KEYS


def config_room(width: int, keys: tuple[str, ...], rows: Sequence[dict[str, Any]]) -> int:
    """What the other columns leave the config column, measured on the cells shown.

    The config takes the rest of the width, so at 160 columns a knob diff is
    not cut at 40 characters, and at 80 it still has a column.
    """
    used = 2  # the vertical scrollbar, when the rows outgrow the table
    for key, label, *_ in COLUMNS:
        if key in keys and key != "config":
            cells = [_width(row[key]) for row in rows]
            used += max([len(label), *cells]) + 2  # cell padding on both sides
    return max(MIN_CONFIG_WIDTH, width - used - 2)  # the config cell's own padding


def _width(cell: Any) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(str(cell))


def cut(cell: Any, room: int) -> Text:
    """A config cell cut to ``room`` with an ellipsis (a plain text never reads as markup)."""
    text = cell.copy() if isinstance(cell, Text) else Text(one_line(str(cell)), no_wrap=True)
    if text.cell_len > room:
        text.truncate(room - 1)
        text.append("…")
    return text


def trial_cells(trial: Any, baseline: Any | None, guard: TrialGuard | None) -> dict[str, Any]:
    """A config's trial: its figures, Δ against the baseline, guard and knob diff, by column."""
    cells: dict[str, Any] = {}
    for key, _label, name, fmt, _higher in COLUMNS:
        if key == "mark":
            cells[key] = Text("★", style="bold yellow") if trial is baseline else ""
        elif key == "id":
            cells[key] = trial.short_id  # hex: nothing markup could read
        elif key == "status":
            cells[key] = status_cell(trial)
        elif key == "config":
            cells[key] = Text(one_line(knob_diff(trial, baseline)), no_wrap=True)
        elif key == "guard":
            cells[key] = guard_cell(guard)
        elif key.startswith("d_"):
            src = next(c for c in COLUMNS if c[0] == key[2:])
            value = metric(trial, src[2]) if src[2] else None
            base = metric(baseline, src[2]) if baseline and src[2] else None
            cells[key] = delta(value, base, src[4]) if trial is not baseline else Text("")
        else:
            value = metric(trial, name) if name else None
            one_piece = key in CHUNK_METRICS and one_piece_warning(trial) is not None
            cells[key] = _Num(value, fmt, flagged=one_piece)
    return cells


def trial_detail(trial: Any, baseline: Any | None, guard: TrialGuard | None) -> Text:
    """The highlighted row in full: every figure with its Δ, the guard and every knob change."""
    out = Text(no_wrap=False)
    out.append(f"{trial.short_id}", style="bold")
    if trial.arm_label:
        out.append(f" {trial.arm_label}")
    out.append(" · ")
    out.append_text(status_cell(trial))
    for key, label, name, fmt, higher in COLUMNS:
        if name is None:
            continue
        value = metric(trial, name)
        out.append(f" · {label} {'–' if value is None else format(value, fmt)}")
        if baseline is not None and trial is not baseline and value is not None:
            change = delta(value, metric(baseline, name), higher)
            if change.plain:
                out.append(" (")
                out.append_text(change)
                out.append(")")
        if key in CHUNK_METRICS and (warning := one_piece_warning(trial)):
            out.append(f" {ONE_PIECE} {warning}", style="yellow")
    out.append(" · guard ")
    out.append_text(guard_cell(guard))
    if trial is baseline:
        out.append(" · ★ the baseline")
    else:
        changes = knob_changes(baseline, trial) if baseline is not None else []
        text = "; ".join(f"{c.key}: {c.baseline} → {c.value}" for c in changes)
        out.append(f" · {one_line(text or knob_diff(trial, baseline))}")
    return out


def step_cells(step: CapacityStep) -> dict[str, Any]:
    """A capacity launch's row: ``L1`` and its capacity (the core's summary) in the config cell."""
    cells: dict[str, Any] = {}
    for key, *_ in COLUMNS:
        if key == "id":
            cells[key] = Text(step.name, style="bold")
        elif key == "status":
            cells[key] = Text("capacity", style="bold")
        elif key == "config":
            cells[key] = Text(step.summary(), style="bold", no_wrap=True)
        else:
            cells[key] = _Num(None, "") if key in _METRIC_KEYS else Text("")
    return cells


def probe_cells(probe: ProbeView) -> dict[str, Any]:
    """A probe's row: its figures and ``probe L1 · 16 users ✓``; no Δ, no guard, never ★."""
    trial = probe.trial
    cells: dict[str, Any] = {}
    for key, _label, name, fmt, _higher in COLUMNS:
        if key == "id":
            cells[key] = trial.short_id
        elif key == "status":
            cells[key] = status_cell(trial)
        elif key == "config":
            style = "green" if probe.met else "red" if probe.met is False else "dim"
            cells[key] = Text(probe.cell(), style=style, no_wrap=True)
        elif key in _METRIC_KEYS and name:
            one_piece = key in CHUNK_METRICS and one_piece_warning(trial) is not None
            cells[key] = _Num(metric(trial, name), fmt, flagged=one_piece)
        else:
            cells[key] = Text("")
    return cells


def status_cell(trial: Any) -> Text:
    """The trial's status, flagged ``⚑`` when its run was contaminated (the core's host note)."""
    cell = Text(str(trial.status))  # an enum value
    results = getattr(trial, "results", None)
    if isinstance(results, dict) and host_note(results) is not None:
        cell.append(f" {BUSY_HOST}", style="bold yellow")
    return cell


def one_piece_warning(trial: Any) -> str | None:
    """The core's warning when most of the trial's responses arrived in one piece."""
    from tuner.bench.metrics import delivery_warning  # aiohttp comes with it: not at start-up

    results = getattr(trial, "results", None)
    return delivery_warning(results, short=True) if isinstance(results, dict) else None


class _Num(Text):
    """A right-aligned number cell that sorts by value (missing values last).

    ``flagged``: the figure is not what it claims (responses in one piece): ``⚠`` before it.
    """

    def __init__(self, value: float | None, fmt: str, flagged: bool = False) -> None:
        shown = "–" if value is None else format(value, fmt)
        super().__init__(justify="right")
        if flagged:
            self.append(f"{ONE_PIECE} ", style="bold yellow")
            self.append(shown, style="dim")
        else:
            self.append(shown)
        self.value = value

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, _Num):
            return NotImplemented
        mine = float("inf") if self.value is None else self.value
        theirs = float("inf") if other.value is None else other.value
        return mine < theirs
