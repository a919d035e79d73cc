"""The GPU panel: one compact cell per GPU under a labelled header, with a short history sparkline.

The sparkline is drawn as text on a fixed 0-100 % scale: Textual's Sparkline
widget scales to the data's own maximum, which draws a steady 3 % as a full
bar; one widget draws every GPU's cell (:class:`GpuGrid`) so a 2 Hz refresh
of eight GPUs stays cheap.

The screen hands it snapshots (read off the event loop by the telemetry
sampler thread); the panel only formats them. Cells flow into as many
columns as the width allows, so eight GPUs take four lines at 80 columns and
two at 160, under one header line that labels each column with its unit
(issue 32): GPU index, GFX utilisation (percent and its recent history), VRAM
used/total in GiB, power in watts and temperature (hotspot, else edge) in °C.
A cell is :data:`CELL_WIDTH` minus the gutter (37 columns) wide, so two sit
side by side in the 76 columns an 80-column terminal leaves inside the
panel's border and padding. A metric the device did not report reads "–".

With no GPU it shows one line that says why, and a second with the host's
CPU and memory use and the engine's (the process trees of the engines this
process runs, from :mod:`tuner.engine.running`, read once a second) so a CPU
run is not blind (issue 13).

With GPUs, a line under the cells says what else is on the node (issue 18):
which slot of a running study holds which GPUs (the core's
:meth:`~tuner.trials.events.StudyStatus.by_gpu`) and the processes on each
GPU that are not one of this tunelab's engines
(:func:`tuner.telemetry.clean.foreign`); a busy GPU's index is drawn green, one
with foreign processes yellow.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import psutil
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.events import MouseMove, Resize
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from tuner.engine import running
from tuner.engine.running import EngineLoad
from tuner.telemetry import GpuSnapshot, clean
from tuner.telemetry import format as fmt
from tuner.telemetry.types import GpuProcess
from tuner.trials.events import SlotState

CELL_WIDTH = 39  # a 37-column cell + 2 gutter: two cells fill the 76 columns inside the panel at 80
GUTTER = 2
SPARK_POINTS = 5
BLOCKS = "▁▂▃▄▅▆▇█"
MISSING = "–"  # a metric the device did not report (never a zero that looks measured)

# Each column: (label, width, label alignment). A cell is the columns joined by
# one space; the header line writes each label over its column. "GFX util"
# spans the percentage and its history; the VRAM label is wider than its values
# and runs over the gap and the first column of the power one, whose label is
# right-aligned ("pwr" sits over the last three characters of "1012W").
COLUMNS: tuple[tuple[str, int, str], ...] = (
    ("GPU", 3, "<"),
    ("GFX util", 4 + SPARK_POINTS, "<"),
    ("VRAM used/tot", 11, "<"),
    ("pwr", 5, ">"),
    ("temp", 5, ">"),
)
CELL_ROOM = CELL_WIDTH - GUTTER


Part = tuple[str, str]  # text and a Rich style name ("" for none): cheap to build and compare


def spark(values: Sequence[float], width: int = SPARK_POINTS) -> Part:
    """Utilisation history on a fixed 0-100 % scale (a relative scale would draw 3 % as a full bar)."""
    tail = list(values)[-width:] if width > 0 else []
    blocks = "".join(
        BLOCKS[min(len(BLOCKS) - 1, max(0, int(v / 100.0 * len(BLOCKS))))] for v in tail
    )
    return blocks.rjust(width), "cyan"


def _gib_value(n: int) -> str:
    """Bytes as GiB: whole GiB, one decimal under 10 GiB (``141``, ``0.4``)."""
    value = n / fmt.GIB
    return f"{value:.1f}" if value < 9.95 else f"{value:.0f}"


def vram_text(used: int | None, total: int | None) -> str:
    """``141/192 GiB``: VRAM used and total in GiB ("–" for a part the device did not report)."""
    if used is None and total is None:
        return MISSING
    shown_used = MISSING if used is None else _gib_value(used)
    shown_total = MISSING if total is None else _gib_value(total)
    return f"{shown_used}/{shown_total} GiB"


def _header_cell() -> str:
    """One cell's labels, each over its column (left- or right-aligned), a space at least between."""
    line = ""
    start = 0
    for label, width, align in COLUMNS:
        at = start if align == "<" else start + width - len(label)
        assert at > len(line) or not line, f"header label {label!r} runs into the one before"
        line = line.ljust(at) + label
        start += width + 1
    assert len(line) <= CELL_ROOM, "the header is wider than a cell"
    return line


HEADER_CELL = _header_cell()


def header_text(columns: int = 1) -> Text:
    """The header line: every column's label over it, once per cell column (``GPU GFX util ...``)."""
    line = (" " * GUTTER).join([HEADER_CELL.ljust(CELL_ROOM)] * max(1, columns))
    return Text(line.rstrip(), no_wrap=True, overflow="crop")


HEADER_TIP = (
    "GPU: index (green: a study's trial holds it; yellow: processes other than "
    "tunelab's engines are on it)\n"
    f"GFX util: graphics/compute busy %, then its last {SPARK_POINTS} readings (0-100 % scale)\n"
    "VRAM used/tot: VRAM in use / VRAM size, GiB\n"
    "pwr: socket power now, W\n"
    "temp: hotspot (junction) temperature, else edge, °C\n"
    f"{MISSING}: the device did not report it"
)


INDEX_STYLE = {"busy": "bold black on green", "foreign": "bold black on yellow"}


def cell_parts(
    snap: GpuSnapshot, history: Sequence[float], mark: str | None = None
) -> tuple[Part, ...]:
    """One GPU's cell under :func:`header_text`: index, GFX util % and history, VRAM, power, temp.

    `` 0   88%▁▂▃▅█ 264/288 GiB 1012W  71°C``. ``mark``: ``busy`` (a study's
    trial holds the GPU) or ``foreign`` (processes other than this tunelab's
    engines are on it) colours the index. Plain (text, style) pairs rather than
    a Rich ``Text``: eight cells at 2 Hz are built, compared and drawn for the
    price of a few string operations. A value wider than its column (a 4-digit
    temperature, a 1000 GiB GPU) takes room from the history, never from a number.
    """
    head: tuple[Part, ...] = (
        (f"{snap.index:>2} ", INDEX_STYLE.get(mark or "", "bold")),
        (" ", ""),
    )
    if snap.error:
        return (*head, ("error", "red"), (" ", ""), spark(history), (" read failed", "red"))
    util = MISSING if snap.gfx_activity is None else f"{snap.gfx_activity:.0f}%"
    watts = MISSING if snap.power_w is None else f"{snap.power_w:.0f}W"
    hot = snap.temp_hotspot if snap.temp_hotspot is not None else snap.temp_edge
    temp = MISSING if hot is None else f"{hot:.0f}°C"
    tail = f" {vram_text(snap.vram_used, snap.vram_total):>11} {watts:>5} {temp:>5}"
    fixed = sum(cell_len(text) for text, _ in head) + len(f"{util:>4}") + len(tail)
    points = max(0, min(SPARK_POINTS, CELL_ROOM - fixed))
    return (*head, (f"{util:>4}", ""), spark(history, points), (tail, ""))


@lru_cache(maxsize=256)
def _on(base: Style, name: str) -> Style:
    """``name`` over the widget's base style (parsed and combined once, not per repaint)."""
    return base + Style.parse(name) if name else base


def cell_tip(snap: GpuSnapshot) -> str:
    """A cell's tooltip: the GPU's name and architecture, the read error if any, else its details."""
    tip = f"GPU {snap.index}: {snap.name or 'unknown'} ({snap.arch or '?'})"
    if snap.error:
        return f"{tip}\n{snap.error}"
    cap = MISSING if snap.power_cap_w is None else f"{snap.power_cap_w:.0f}"
    watts = MISSING if snap.power_w is None else f"{snap.power_w:.0f}"
    temps = "/".join(
        MISSING if t is None else f"{t:.0f}"
        for t in (snap.temp_edge, snap.temp_hotspot, snap.temp_mem)
    )
    umc = MISSING if snap.umc_activity is None else f"{snap.umc_activity:.0f}%"
    return (
        f"{tip}\nVRAM {vram_text(snap.vram_used, snap.vram_total)} · memory controller busy {umc}"
        f"\npower {watts}/{cap} W (now/cap) · temp edge/hotspot/memory {temps} °C"
    )


class GpuGrid(Widget):
    """Every GPU's one-line cell, in as many columns as fit: one widget draws them all.

    Eight cell widgets in a CSS grid cost Textual a refresh, a render and a
    compositor pass each, plus one for every container above them, on every
    2 Hz tick: most of the TUI's idle CPU (issue 13). This widget keeps each
    cell's text, draws its lines itself from cached strips (:meth:`render_line`)
    and repaints only the rows whose cells changed; it asks for a layout only
    when the number of rows changes.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._cells: list[tuple[Part, ...]] = []
        self._tips: list[str | GpuSnapshot] = []  # a snapshot: its tip is written on hover
        self._columns = 1
        self._rows: dict[int, Strip] = {}
        self._changed: set[int] = set()
        self._width = 0  # kept on resize: reading ``size`` costs a layout lookup at 2 Hz

    @property
    def count(self) -> int:
        """How many GPU cells the grid draws."""
        return len(self._cells)

    def text(self, index: int) -> Text:
        """GPU ``index``'s cell as drawn now."""
        return Text.assemble(*self._cells[index])

    def tip(self, index: int) -> str:
        """GPU ``index``'s tooltip (:func:`cell_tip` of its newest snapshot)."""
        held = self._tips[index]
        return held if isinstance(held, str) else cell_tip(held)

    def set_count(self, count: int) -> None:
        """One cell per GPU, each saying it waits for its first reading."""
        self._cells = [((f"{i:>2}  …", "dim"),) for i in range(count)]
        self._tips = [f"GPU {i}" for i in range(count)]
        self._fit()

    def set_columns(self, columns: int) -> None:
        """Cells per row (the panel's width decides)."""
        if columns != self._columns:
            self._columns = max(1, columns)
            self._fit()

    def _fit(self) -> None:
        self._rows.clear()
        rows = -(-len(self._cells) // self._columns)  # 0 rows with no GPU
        if self.styles.height is None or self.styles.height.value != rows:
            self.styles.height = rows  # a layout pass, only when the row count changes
        self.refresh()

    def show(self, snap: GpuSnapshot, history: Sequence[float], mark: str | None = None) -> None:
        """Set GPU ``snap.index``'s cell from its newest snapshot (:meth:`repaint_changed` draws it)."""
        index = snap.index
        if not 0 <= index < len(self._cells):
            return
        parts = cell_parts(snap, history, mark)
        self._tips[index] = snap  # the tip text is built when a pointer asks, not at 2 Hz
        if parts == self._cells[index]:
            return
        self._cells[index] = parts
        row = index // self._columns
        self._rows.pop(row, None)
        self._changed.add(row)

    def repaint_changed(self) -> None:
        """One repaint of the rows whose cells changed since the last call."""
        if self._changed:
            top, bottom = min(self._changed), max(self._changed)
            self._changed.clear()
            self.refresh(Region(0, top, self._width, bottom - top + 1))

    def on_resize(self, event: Resize) -> None:
        self._width = event.size.width

    def notify_style_update(self) -> None:
        """A theme or CSS change: the cached rows carry the old base style."""
        self._rows.clear()
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        strip = self._rows.get(y)
        if strip is None or strip.cell_length != width:
            strip = self._draw_row(y, width)
            self._rows[y] = strip
        return strip

    def _draw_row(self, y: int, width: int) -> Strip:
        base = self.visual_style.rich_style
        first = y * self._columns
        cells = self._cells[first : first + self._columns]
        if not cells:
            return Strip.blank(width, base)
        room = CELL_ROOM
        segments: list[Segment] = []
        for n, parts in enumerate(cells):
            if n:
                segments.append(Segment(" " * GUTTER, base))
            cell = [Segment(text, _on(base, name)) for text, name in parts]
            used = sum(cell_len(text) for text, _ in parts)
            if used > room:  # never spill into the next cell
                cell = list(Strip(cell).crop_extend(0, room, base))
            elif used < room:
                cell.append(Segment(" " * (room - used), base))
            segments.extend(cell)
        return Strip(segments).crop_extend(0, width, base)

    def on_mouse_move(self, event: MouseMove) -> None:
        """The tooltip follows the pointer from cell to cell."""
        column = min(event.x // CELL_WIDTH, self._columns - 1)
        index = event.y * self._columns + column
        tip = self.tip(index) if 0 <= index < len(self._tips) else None
        if tip != self.tooltip:
            self.tooltip = tip


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1024**3:.0f} GiB"


def node_line(
    snaps: Sequence[GpuSnapshot],
    busy: dict[int, SlotState],
    others: dict[int, tuple[GpuProcess, ...]],
) -> Text | None:
    """``GPU 0,1 A1 1a2b3c4d measuring · GPU 3: 2 other processes (4242 python3 179 GiB)``.

    None when no study holds a GPU and nothing foreign is on any: the line hides.
    """
    if not busy and not others:
        return None  # the usual idle tick: nothing to build
    out = Text(no_wrap=True, overflow="ellipsis")
    seen: set[str] = set()
    for gpu in sorted(busy):
        slot = busy[gpu]
        if slot.slot in seen:
            continue
        seen.add(slot.slot)
        out.append(" · " if out else "")
        out.append(f"{slot.slot} ", style="bold green")
        out.append(f"{slot.label} {(slot.trial_id or '')[:8]} {slot.stage}")
    for snap in snaps:
        procs = others.get(snap.index)
        if not procs:
            continue
        out.append(" · " if out else "")
        out.append(f"GPU {snap.index}: ", style="bold yellow")
        listed = ", ".join(f"{p.pid} {p.name or '?'} {_gib(p.vram_bytes)}" for p in procs[:3])
        more = f", +{len(procs) - 3}" if len(procs) > 3 else ""
        out.append(f"{len(procs)} other process{'es' if len(procs) > 1 else ''} ({listed}{more})")
    return out if out else None


def host_line(
    host_cpu: float, cores: int, mem_used: int, mem_total: int, engine: EngineLoad
) -> Text:
    """`host CPU 37% of 2 cores · mem 5.1/15.6 GiB · engine 3 procs: CPU 180% · RSS 2.3 GiB`."""
    gib = 1024**3
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("host ", style="bold")
    out.append(
        f"CPU {host_cpu:.0f}% of {cores} cores · mem {mem_used / gib:.1f}/{mem_total / gib:.1f} GiB"
    )
    out.append(" · engine ", style="bold")
    if not engine.procs:
        out.append("not running", style="dim")
    else:
        out.append(
            f"{engine.procs} proc{'s' if engine.procs > 1 else ''}: CPU {engine.cpu:.0f}% · "
            f"RSS {engine.rss / gib:.2f} GiB"
        )
    return out


class GpuPanel(Widget):
    """All GPUs, or one line saying why there is none (then the host's load)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._busy: dict[int, SlotState] = {}
        self._snaps: Sequence[GpuSnapshot] = ()
        self._histories: Sequence[Sequence[float]] = ()
        self._node_text = ""
        # Kept, not queried: the 2 Hz refresh reaches them without a DOM query each tick.
        self._grid_widget = GpuGrid(id="gpu-grid")
        self._head_widget = Static("", id="gpu-head")
        self._head_widget.display = False
        self._head_widget.tooltip = HEADER_TIP
        self._head_columns = 0
        self._node_widget = Static("", id="gpu-node")
        self._node_widget.display = False

    def compose(self) -> ComposeResult:
        yield Static("GPU telemetry: starting…", id="gpu-none")
        host = Static("", id="host-load")
        host.display = False
        yield host
        yield self._head_widget
        yield self._grid_widget
        yield self._node_widget

    @property
    def snapshots(self) -> Sequence[GpuSnapshot]:
        """The snapshots the cells show now."""
        return self._snaps

    def occupy(self, busy: dict[int, SlotState]) -> None:
        """Which study slot holds which GPU now (the core's ``StudyStatus.by_gpu()``)."""
        if busy == self._busy:
            return
        self._busy = busy
        if self._snaps:
            self.show(self._snaps, self._histories)

    def on_mount(self) -> None:
        self.border_title = "GPUs"

    def show_none(self, description: str, reasons: Sequence[str]) -> None:
        """No GPU: say why in one line (the full reasons are in the tooltip)."""
        why = "; ".join(reasons) if reasons else description
        line = self.query_one("#gpu-none", Static)
        line.update(f"No GPU: runs use the CPU engine ({why})")
        line.tooltip = "\n".join(reasons) or description
        line.display = True
        self.border_title = "GPUs: none · host load"
        self.query_one("#host-load").display = True
        self._engine = EngineLoad()
        psutil.cpu_percent(None)  # primes the interval-less reading
        self._host_tick()
        self.set_interval(1.0, self._host_tick)

    def _host_tick(self) -> None:
        """Once a second with no GPU: /proc reads of a few processes, well under a millisecond."""
        mem = psutil.virtual_memory()
        text = host_line(
            psutil.cpu_percent(None),
            psutil.cpu_count() or 1,
            mem.total - mem.available,
            mem.total,
            self._engine.sample(),
        )
        line = self.query_one("#host-load", Static)
        # One fixed-height line: a repaint, not a layout pass of the whole screen each second.
        line.update(text, layout=False)

    def setup(self, count: int, description: str) -> None:
        """Create one cell per GPU (called once the backend is open)."""
        self.query_one("#gpu-none", Static).display = False
        grid = self.query_one(GpuGrid)
        if grid.count != count:
            grid.set_count(count)
        self.border_title = f"GPUs · {description}"
        self._head_widget.display = count > 0
        self._head_columns = 0  # (re)write the header for the columns that fit now
        self._fit_columns(self.size.width)

    def show(self, snaps: Sequence[GpuSnapshot], histories: Sequence[Sequence[float]]) -> bool:
        """Update every cell; False while the grid has fewer cells than snapshots (not set up)."""
        self._snaps, self._histories = snaps, histories
        grid = self._grid()
        if grid is None:
            return False  # the panel is being torn down (quit) while a poll was due
        # Engine trees are read only when some GPU lists processes (none: nothing to sort out).
        listed = any(s.processes for s in snaps)
        own = running.engine_pids() if listed else set()
        others = {s.index: found for s in snaps if (found := clean.foreign(s.processes, own))}
        with self.app.batch_update():  # one repaint for all cells
            for snap, history in zip(snaps, histories, strict=False):
                mark = (
                    "foreign"
                    if snap.index in others
                    else "busy"
                    if snap.index in self._busy
                    else None
                )
                grid.show(snap, history, mark)
            grid.repaint_changed()
            self._show_node(node_line(snaps, self._busy, others))
        if snaps:
            parts = {fmt.partition(s) for s in snaps if not s.error}
            names = {s.name for s in snaps if s.name}
            name = next(iter(names)) if len(names) == 1 else "mixed"
            part = next(iter(parts)) if len(parts) == 1 else "mixed partitions"
            subtitle = f"{len(snaps)} × {name} · {part}"
            if subtitle != self.border_subtitle:
                self.border_subtitle = subtitle
        return grid.count >= len(snaps)

    def _grid(self) -> GpuGrid | None:
        """The grid, or None once the panel is being torn down (a poll may still be due)."""
        return self._grid_widget if self._grid_widget.is_attached else None

    def cell_text(self, index: int) -> Text:
        """GPU ``index``'s cell as drawn now (what a user reads on the screen)."""
        grid = self._grid()
        assert grid is not None, "the GPU panel is not mounted"
        return grid.text(index)

    @property
    def cell_count(self) -> int:
        """How many GPU cells the panel draws (0 before the backend is open)."""
        grid = self._grid()
        return 0 if grid is None else grid.count

    def _show_node(self, line: Text | None) -> None:
        """The line under the cells; repainted only when its text changed (2 Hz must stay cheap)."""
        node = self._node_widget
        if not node.is_attached:
            return  # the panel is being torn down (quit) while a poll was due
        if line is None:
            node.display = False
            self._node_text = ""
            return
        if line.plain != self._node_text:
            self._node_text = line.plain
            node.update(line, layout=False)  # one fixed-height line: a repaint, no layout pass
        node.display = True

    def on_resize(self, event: Resize) -> None:
        # The event gives the outer size: the cells live inside the border and padding.
        self._fit_columns(event.size.width - self.styles.gutter.width)

    def _fit_columns(self, width: int) -> None:
        """As many whole cells as fit in ``width`` content columns (the last needs no gutter)."""
        grid = self._grid()
        if grid is None:
            return
        columns = max(1, (width + GUTTER) // CELL_WIDTH)
        grid.set_columns(columns)
        head = self._head_widget
        if head.is_attached and columns != self._head_columns:
            self._head_columns = columns
            head.update(header_text(columns), layout=False)  # one fixed-height line
