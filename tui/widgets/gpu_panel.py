"""The GPU panel: one compact cell per GPU with bars and a short history sparkline.

The sparkline is drawn as text on a fixed 0-100 % scale: Textual's Sparkline
widget scales to the data's own maximum, which draws a steady 3 % as a full
bar, and one Static per GPU keeps a 2 Hz refresh of eight GPUs cheap.

The screen hands it snapshots (read off the event loop by the telemetry
sampler thread); the panel only formats them. Cells flow into as many
columns as the width allows, so eight GPUs take four lines at 80 columns and
two at 160. With no GPU it shows one line that says why, and a second with
the host's CPU and memory use and the engine's (the process trees of the
engines this process runs, from :mod:`tuner.engine.running`, read once a
second) so a CPU run is not blind (issue 13).

With GPUs, a line under the cells says what else is on the node (issue 18):
which slot of a running study holds which GPUs (the core's
:meth:`~tuner.trials.events.StudyStatus.by_gpu`) and the processes on each
GPU that are not one of this tunelab's engines
(:func:`tuner.telemetry.clean.foreign`); a busy GPU's index is drawn green, one
with foreign processes yellow.
"""

from __future__ import annotations

from collections.abc import Sequence

import psutil
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container
from textual.events import Resize
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from tuner.engine import running
from tuner.engine.running import EngineLoad
from tuner.telemetry import GpuSnapshot, clean
from tuner.telemetry import format as fmt
from tuner.telemetry.types import GpuProcess
from tuner.trials.events import SlotState

CELL_WIDTH = 39  # 38 + 1 gutter
SPARK_POINTS = 8
BLOCKS = "▁▂▃▄▅▆▇█"


def bar(fraction: float | None, width: int = 5) -> Text:
    """A block bar for 0..1 (N/A as dots): compact and readable over SSH."""
    if fraction is None:
        return Text("·" * width, style="dim")
    fraction = max(0.0, min(1.0, fraction))
    full = round(fraction * width)
    style = "green" if fraction < 0.6 else "yellow" if fraction < 0.85 else "red"
    return Text("█" * full, style=style) + Text("░" * (width - full), style="dim")


def spark(values: Sequence[float], width: int = SPARK_POINTS) -> Text:
    """Utilisation history on a fixed 0-100 % scale (a relative scale would draw 3 % as a full bar)."""
    tail = list(values)[-width:]
    blocks = "".join(
        BLOCKS[min(len(BLOCKS) - 1, max(0, int(v / 100.0 * len(BLOCKS))))] for v in tail
    )
    return Text(blocks.rjust(width), style="cyan")


INDEX_STYLE = {"busy": "bold black on green", "foreign": "bold black on yellow"}


def cell_text(snap: GpuSnapshot, mark: str | None = None) -> tuple[Text, Text]:
    """Left (index, util bar, %) and right (VRAM, power, hotspot temp) parts of a cell.

    ``mark``: ``busy`` (a study's trial holds the GPU) or ``foreign`` (processes
    other than this tunelab's engines are on it) colours the index.
    """
    left = Text(f"{snap.index:>1}", style=INDEX_STYLE.get(mark or "", "bold"))
    left.append(" ")
    if snap.error:
        left.append("error", style="red")
        return left, Text(" read failed", style="red")
    util = snap.gfx_activity
    left.append_text(bar(None if util is None else util / 100.0))
    left.append(f" {fmt.pct(util):>4}")
    right = Text(" ")
    frac = None
    if snap.vram_used is not None and snap.vram_total:
        frac = snap.vram_used / snap.vram_total
    right.append("M")
    right.append_text(bar(frac, 3))
    watts = "N/A" if snap.power_w is None else f"{snap.power_w:.0f}W"
    hot = snap.temp_hotspot if snap.temp_hotspot is not None else snap.temp_edge
    right.append(f" {watts:>5} {fmt.temp(hot)}°C")
    return left, right


class GpuCell(Widget):
    """One GPU: util bar, util history, VRAM bar, power, temperature — one line, one widget.

    A fixed-size widget that repaints itself only when its text changed, and
    never asks for a layout pass: eight of them at 2 Hz must cost next to nothing.
    It draws its one line itself (:meth:`render_line` over a cached strip) rather
    than through :meth:`render`: Textual's general path converts the text to its
    own content model on every repaint, which was most of the idle CPU (issue 13).
    """

    def __init__(self, index: int) -> None:
        super().__init__(classes="gpu-cell", id=f"gpu-{index}")
        self.index = index
        self._text = Text(f"{index} …", style="dim")
        self._strip: Strip | None = None

    def render(self) -> Text:
        """The cell's text (what :meth:`render_line` draws)."""
        return self._text

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.visual_style.rich_style
        if y != 0:
            return Strip.blank(width, base)
        strip = self._strip
        if strip is None or strip.cell_length != width:
            segments = self._text.render(self.app.console)
            strip = Strip(segments).apply_style(base).crop_extend(0, width, base)
            self._strip = strip
        return strip

    def show(self, snap: GpuSnapshot, history: Sequence[float], mark: str | None = None) -> None:
        """Set the cell's content from the newest snapshot and the util history."""
        left, right = cell_text(snap, mark)
        text = Text.assemble(left, " ", spark(history), right)
        if text.plain == self._text.plain and text.spans == self._text.spans:
            return
        self._text = text
        self._strip = None
        tip = f"GPU {snap.index}: {snap.name or 'unknown'} ({snap.arch or '?'}); M = VRAM used"
        tip = f"{tip}\n{snap.error}" if snap.error else tip
        if tip != self.tooltip:
            self.tooltip = tip
        self.refresh()


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

    def compose(self) -> ComposeResult:
        yield Static("GPU telemetry: starting…", id="gpu-none")
        host = Static("", id="host-load")
        host.display = False
        yield host
        yield Container(id="gpu-grid")
        node = Static("", id="gpu-node")
        node.display = False
        yield node

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
        grid = self.query_one("#gpu-grid")
        if len(grid.children) != count:
            grid.remove_children()
            grid.mount_all(GpuCell(i) for i in range(count))
        self.border_title = f"GPUs · {description}"
        self._fit_columns(self.size.width)

    def show(self, snaps: Sequence[GpuSnapshot], histories: Sequence[Sequence[float]]) -> bool:
        """Update every cell; False while the cells are still mounting (show it again later)."""
        self._snaps, self._histories = snaps, histories
        cells = list(self.query(GpuCell))
        # Engine trees are read only when some GPU lists processes (none: nothing to sort out).
        listed = any(s.processes for s in snaps)
        own = running.engine_pids() if listed else set()
        others = {s.index: found for s in snaps if (found := clean.foreign(s.processes, own))}
        with self.app.batch_update():  # one repaint for all cells
            for cell, snap, history in zip(cells, snaps, histories, strict=False):
                mark = (
                    "foreign"
                    if snap.index in others
                    else "busy"
                    if snap.index in self._busy
                    else None
                )
                cell.show(snap, history, mark)
            self._show_node(node_line(snaps, self._busy, others))
        if snaps:
            parts = {fmt.partition(s) for s in snaps if not s.error}
            names = {s.name for s in snaps if s.name}
            name = next(iter(names)) if len(names) == 1 else "mixed"
            part = next(iter(parts)) if len(parts) == 1 else "mixed partitions"
            subtitle = f"{len(snaps)} × {name} · {part}"
            if subtitle != self.border_subtitle:
                self.border_subtitle = subtitle
        return len(cells) >= len(snaps)

    def _show_node(self, line: Text | None) -> None:
        """The line under the cells; repainted only when its text changed (2 Hz must stay cheap)."""
        found = self.query("#gpu-node").results(Static)
        node = next(iter(found), None)
        if node is None:
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
        self._fit_columns(event.size.width)

    def _fit_columns(self, width: int) -> None:
        columns = max(1, (width - 2) // CELL_WIDTH)
        self.query_one("#gpu-grid").styles.grid_size_columns = columns
