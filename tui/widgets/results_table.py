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
CONFIG_WIDTH = 40  # knob diffs beyond this end in an ellipsis (the compare view shows all)
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
    """All trials, newest last."""

    guards: dict[str, TrialGuard]  # trial id -> the guard's verdict, as last shown

    def on_mount(self) -> None:
        self.guards = {}
        self.cursor_type = "row"
        self.zebra_stripes = True
        for key, label, *_ in COLUMNS:
            self.add_column(label, key=key)

    def show(
        self,
        trials: Sequence[Any],
        baseline_id: str | None,
        guards: Mapping[str, TrialGuard] | None = None,
        steps: Sequence[CapacityStep] = (),
    ) -> None:
        """Fill the table; the baseline row is marked ★ and deltas are against it.

        ``guards``: each trial's output-guard verdict (``Study.guards``); none: ``—``.
        ``steps``: the study's capacity launches (``Study.capacity_steps``): each
        launch gets a row with its capacity above its first probe, and a probe row
        shows its load and ✓/✗, never a Δ against a baseline at another load.
        """
        self.clear()
        baseline = next((t for t in trials if t.id == baseline_id), None)
        self.guards = guards = dict(guards or {})
        heads = {step.trial_ids[0]: step for step in steps}
        for trial in trials:
            step = heads.get(trial.id)
            if step is not None:
                self.add_row(*step_cells(step), key=STEP_KEY + trial.id)
            probe = probe_view(trial)
            if probe is not None:
                self.add_row(*probe_cells(probe), key=trial.id)
                continue
            cells: list[Any] = []
            for key, _label, name, fmt, _higher in COLUMNS:
                if key == "mark":
                    cells.append(Text("★", style="bold yellow") if trial is baseline else "")
                elif key == "id":
                    cells.append(trial.short_id)  # hex: nothing markup could read
                elif key == "status":
                    cells.append(status_cell(trial))
                elif key == "config":
                    cells.append(config_cell(knob_diff(trial, baseline)))
                elif key == "guard":
                    cells.append(guard_cell(guards.get(trial.id)))
                elif key.startswith("d_"):
                    src = next(c for c in COLUMNS if c[0] == key[2:])
                    value = metric(trial, src[2]) if src[2] else None
                    base = metric(baseline, src[2]) if baseline and src[2] else None
                    cells.append(delta(value, base, src[4]) if trial is not baseline else Text(""))
                else:
                    value = metric(trial, name) if name else None
                    one_piece = key in CHUNK_METRICS and one_piece_warning(trial) is not None
                    cells.append(_Num(value, fmt, flagged=one_piece))
            self.add_row(*cells, key=trial.id)


def step_cells(step: CapacityStep) -> list[Any]:
    """A capacity launch's row: ``L1`` and its capacity (the core's summary) in the config cell."""
    cells: list[Any] = []
    for key, *_ in COLUMNS:
        if key == "id":
            cells.append(Text(step.name, style="bold"))
        elif key == "status":
            cells.append(Text("capacity", style="bold"))
        elif key == "config":
            cells.append(Text(step.summary(), style="bold", no_wrap=True))
        else:
            cells.append(_Num(None, "") if key in _METRIC_KEYS else Text(""))
    return cells


def probe_cells(probe: ProbeView) -> list[Any]:
    """A probe's row: its figures and ``probe L1 · 16 users ✓``; no Δ, no guard, never ★."""
    trial = probe.trial
    cells: list[Any] = []
    for key, _label, name, fmt, _higher in COLUMNS:
        if key == "id":
            cells.append(trial.short_id)
        elif key == "status":
            cells.append(status_cell(trial))
        elif key == "config":
            style = "green" if probe.met else "red" if probe.met is False else "dim"
            cells.append(Text(probe.cell(), style=style, no_wrap=True))
        elif key in _METRIC_KEYS and name:
            one_piece = key in CHUNK_METRICS and one_piece_warning(trial) is not None
            cells.append(_Num(metric(trial, name), fmt, flagged=one_piece))
        else:
            cells.append(Text(""))
    return cells


def config_cell(text: str, width: int = CONFIG_WIDTH) -> Text:
    """The knob diff as plain text (no markup, no escapes: knob values are foreign text), cut to
    ``width`` with an ellipsis."""
    text = one_line(text)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return Text(text, no_wrap=True)


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
