"""The TUI shows foreign text (engine log lines, knob values, model configs, failure reasons)
without its escape sequences and with invisible bidi controls made visible, as the CLI and the
report do (tuner.foreign_text)."""

from __future__ import annotations

from tui.screens.log_view import render_line
from tui.widgets.results_table import cut
from tui.widgets.run_panel import LogLine

HOSTILE = "ok\x1b[2J\x1b]0;pwned\x07 ev\u202eli\u2066x"


def _safe(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    assert "\u202e" not in text and "\u2066" not in text
    assert "<U+202E>" in text and "<U+2066>" in text


def test_engine_log_lines_lose_escapes_and_show_bidi_controls() -> None:
    for shutdown in (False, True):
        _safe(render_line(LogLine(HOSTILE, shutdown=shutdown)).plain)


def test_knob_values_in_the_results_table_are_one_clean_line() -> None:
    cell = cut(f"served-model-name={HOSTILE}\nmax-num-seqs=8", 200).plain
    _safe(cell)
    assert "\n" not in cell
