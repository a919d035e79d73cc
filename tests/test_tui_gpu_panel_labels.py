"""The GPU panel reads at a glance at 80×24 with 8 GPUs (issue 32).

The real app on the amdsmi backend over the recorded FAKE amdsmi module
(``tests/fakes/fake_amdsmi.py``, 8 × MI355X: GPU 5 fails every read, GPU 6
reports no VRAM use). What is checked is what the terminal shows (the
screen's composed lines), not the panel's own idea of it: one header line
labels every column; each GPU's VRAM reads ``used/total GiB``, equal to the
snapshot's bytes in GiB; and each cell, header included, fits whole inside
the panel's border, with no number cut.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.geometry import Region
from textual.pilot import Pilot

from tests.support.tui_harness import services, settle, wait_for
from tui.app import TunelabApp
from tui.widgets.gpu_panel import CELL_WIDTH, GpuPanel, cell_parts
from tuner.telemetry.types import GpuSnapshot

GIB = 1024**3
LABELS = ("GPU", "GFX util", "VRAM used/tot", "pwr", "temp")
VRAM = re.compile(r"(–|\d+(?:\.\d+)?)/(–|\d+(?:\.\d+)?) GiB")


def _screen(app: TunelabApp) -> list[str]:
    """The terminal's lines as composed now (what a user reads)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _slice(lines: list[str], region: Region, row: int) -> str:
    return lines[region.y + row][region.x : region.right]


def _close(shown: str, n_bytes: int | None) -> bool:
    """``shown`` is ``n_bytes`` in GiB to its last digit ("–" for a value the device left out)."""
    if n_bytes is None:
        return shown == "–"
    if shown == "–":
        return False
    decimals = len(shown.partition(".")[2])
    return abs(float(shown) - n_bytes / GIB) <= 0.5 * 10.0**-decimals + 1e-9


def _whole(value: str, text: str) -> bool:
    """``value`` is in ``text`` with no digit or decimal point glued to either side (not cut)."""
    return re.search(rf"(?<![\d.]){re.escape(value)}(?![\d.])", text) is not None


async def _panel_at_80x24(pilot: Pilot[None], app: TunelabApp) -> GpuPanel:
    await settle(pilot)
    panel = app.main.query_one(GpuPanel)
    await wait_for(pilot, lambda: panel.cell_count == 8 and len(panel.snapshots) == 8, 10, "8 GPUs")
    await wait_for(pilot, lambda: "%" in panel.cell_text(0).plain, 10, "GPU 0's first reading")
    await pilot.pause(0.3)
    return panel


async def test_one_header_labels_every_column_and_vram_reads_used_total_gib() -> None:
    app = TunelabApp(services=services(gpus=True, rate_hz=5.0))
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await _panel_at_80x24(pilot, app)
        content = panel.content_region
        lines = _screen(app)
        header = _slice(lines, content, 0)
        columns = 2  # 8 GPUs in 4 lines under the header: the panel leaves the rest to the body
        assert panel.query_one("#gpu-grid").size.height == 4, panel.query_one("#gpu-grid").size
        assert header.count("VRAM used/tot") == columns, header
        # Once per column of cells, in that order, on one line above the cells.
        for column in range(columns):
            cell_head = header[column * CELL_WIDTH : (column + 1) * CELL_WIDTH]
            found = [cell_head.find(label) for label in LABELS]
            assert all(at >= 0 for at in found), (column, header)
            assert found == sorted(found), (column, header)
        assert sum("GPU" in _slice(lines, content, row) for row in range(1, 5)) == 0
        # Four rows of two cells under it; the old unexplained "M" bar is gone.
        rows = [_slice(lines, content, 1 + row) for row in range(4)]
        assert not any(re.search(r"\bM[█░·]", row) for row in rows), rows
        checked = 0
        for snap in panel.snapshots:
            row, column = divmod(snap.index, columns)
            cell = rows[row][column * CELL_WIDTH : (column + 1) * CELL_WIDTH]
            assert cell.split()[0] == str(snap.index), (snap.index, cell)
            if snap.error:
                assert "error" in cell, cell
                continue
            match = VRAM.search(cell)
            assert match, (snap.index, cell)
            used, total = match.groups()
            assert _close(used, snap.vram_used), (snap.index, cell, snap.vram_used)
            assert _close(total, snap.vram_total), (snap.index, cell, snap.vram_total)
            # The label sits over the value: both in the same cell's columns.
            vram_at = header[column * CELL_WIDTH :].find("VRAM")
            assert vram_at <= match.start() <= vram_at + len("VRAM used/tot"), (header, cell)
            # Every number whole, with its unit.
            assert snap.gfx_activity is not None and snap.power_w is not None
            hot = snap.temp_hotspot if snap.temp_hotspot is not None else snap.temp_edge
            for value in (f"{snap.gfx_activity:.0f}%", f"{snap.power_w:.0f}W", f"{hot:.0f}°C"):
                assert _whole(value, cell), (value, cell)
            checked += 1
        assert checked >= 6  # the recording's healthy GPUs (GPU 5 fails every read)
        assert any(snap.vram_used is None for snap in panel.snapshots if not snap.error)


async def test_every_row_fits_inside_the_panel_at_80x24_with_8_gpus() -> None:
    app = TunelabApp(services=services(gpus=True, rate_hz=5.0))
    async with app.run_test(size=(80, 24)) as pilot:
        panel = await _panel_at_80x24(pilot, app)
        content = panel.content_region
        lines = _screen(app)
        outer = panel.region
        assert outer.right <= 80 and outer.bottom <= 24, outer
        # The border on both sides of every line: nothing drawn over it or past it.
        for y in range(content.y, content.bottom):
            assert lines[y][outer.x] == "│" and lines[y][outer.right - 1] == "│", lines[y]
        header = str(panel.query_one("#gpu-head").render())
        assert cell_len(header.rstrip()) <= content.width, header
        assert _slice(lines, content, 0).rstrip() == header.rstrip()
        for index in range(8):
            text = panel.cell_text(index).plain.rstrip()
            row, column = divmod(index, 2)
            start = column * CELL_WIDTH
            assert start + cell_len(text) <= content.width, (index, text)
            if column == 0:  # the gutter keeps it apart from its right neighbour
                assert start + cell_len(text) < CELL_WIDTH - 1, (index, text)
            shown = _slice(lines, content, 1 + row)[start : start + cell_len(text)]
            assert shown == text, (index, shown, text)


def test_a_cell_keeps_every_number_whole_whatever_its_width() -> None:
    """Wide values (a 2-digit index, 100 %, 4-digit watts, 3-digit °C) fit the cell: the history gives way."""
    room = CELL_WIDTH - 2
    cases = [
        GpuSnapshot(
            index=0, gfx_activity=3.0, vram_used=141 * GIB + GIB // 3, vram_total=192 * GIB
        ),
        GpuSnapshot(
            index=15,
            gfx_activity=100.0,
            vram_used=1500 * GIB,
            vram_total=2048 * GIB,
            power_w=12345.0,
            temp_hotspot=105.0,
        ),
        GpuSnapshot(index=3),  # nothing reported: "–", never a crash or a zero
    ]
    histories = [[50.0] * 10, [50.0] * 10, []]
    texts = ["".join(t for t, _ in cell_parts(s, h)) for s, h in zip(cases, histories, strict=True)]
    assert "141/192 GiB" in texts[0], texts[0]
    for needle in ("15", "100%", "1500/2048 GiB", "12345W", "105°C"):
        assert _whole(needle, texts[1]), (needle, texts[1])
    assert texts[2].split() == ["3", "–", "–", "–", "–"], texts[2]
    for text in texts:
        assert cell_len(text) <= room, (cell_len(text), text)
