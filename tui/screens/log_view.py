"""The engine log view (`l`): full width, scrollable, searchable, with the log file's path.

The run panel shows tunelab's own events; the engine's output lives here
(issue 13: ~30 lines of ``nanobind: leaked …`` and a post-Stop traceback
buried the result). Lines vLLM wrote after tunelab asked it to stop are
marked ``shutdown`` and dimmed, so a teardown traceback does not read as a
crash. Typing in the search box keeps only the matching lines (case
insensitive) and highlights the match.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, RichLog, Static

from tui.widgets.footer import TunelabFooter
from tui.widgets.run_panel import EngineLog, LogLine
from tuner.foreign_text import clean

SHUTDOWN_MARK = "shutdown │ "


def render_line(line: LogLine, query: str = "") -> Text:
    """One line, shutdown output dimmed and marked, the search match highlighted."""
    if line.shutdown:
        text = Text(SHUTDOWN_MARK, style="yellow")
        text.append(clean(line.text), style="dim")
    else:
        text = Text(clean(line.text))  # the engine's output: foreign text
    if query:
        text.highlight_words([query], style="bold reverse", case_sensitive=False)
    return text


class LogView(Screen[None]):
    """The whole engine log of the current (or last) job."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="log.close"),
        Binding("slash", "search", "Search", id="log.search"),
        Binding("w", "wrap", "Wrap", id="log.wrap"),
        Binding("g", "top", "Top", show=False, id="log.top"),
        Binding("G", "bottom", "Bottom", show=False, id="log.bottom"),
    ]

    def __init__(self, log: EngineLog) -> None:
        super().__init__()
        self.engine_log = log

    def compose(self) -> ComposeResult:
        yield Static("", id="log-header")
        yield Input(placeholder="search the engine log (/)", id="log-search", compact=True)
        # Wrapped by default: a long line (vLLM's `non-default args`) is read whole; `w`
        # unwraps it for column-aligned output, which then scrolls sideways.
        yield RichLog(wrap=True, min_width=20, markup=False, highlight=False, id="log-lines")
        yield TunelabFooter(compact=True)

    def on_mount(self) -> None:
        self.show_lines("")
        self.query_one("#log-lines", RichLog).focus()

    def show_lines(self, query: str) -> int:
        """Fill the view with the lines matching ``query`` (all when empty); returns how many."""
        view = self.query_one("#log-lines", RichLog)
        view.clear()
        needle = query.lower()
        shown = 0
        for line in self.engine_log.lines:
            if needle and needle not in line.text.lower():
                continue
            view.write(render_line(line, query))
            shown += 1
        self.query_one("#log-header", Static).update(self._header(query, shown))
        return shown

    def _header(self, query: str, shown: int) -> Text:
        log = self.engine_log
        total = len(log.lines)
        out = Text("Engine log", style="bold")
        path = log.path
        out.append(f" · {path}" if path else " · no log file yet (no engine started)", style="")
        out.append(f" · {total} lines", style="dim")
        if log.shutdown_count:
            out.append(f", {log.shutdown_count} after the stop request (shutdown)", style="yellow")
        if query:
            out.append(f" · {shown} match “{query}”", style="bold")
        wrap = self.query_one("#log-lines", RichLog).wrap
        out.append(f" · {'wrapped' if wrap else 'unwrapped'} (w) · Esc closes", style="dim")
        return out

    def on_input_changed(self, event: Input.Changed) -> None:
        self.show_lines(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#log-lines", RichLog).focus()

    def action_wrap(self) -> None:
        view = self.query_one("#log-lines", RichLog)
        view.wrap = not view.wrap
        self.show_lines(self.query_one("#log-search", Input).value)
        self.notify("long lines wrapped" if view.wrap else "long lines scroll sideways (←/→)")

    def action_search(self) -> None:
        self.query_one("#log-search", Input).focus()

    def action_top(self) -> None:
        self.query_one("#log-lines", RichLog).scroll_home(animate=False)

    def action_bottom(self) -> None:
        self.query_one("#log-lines", RichLog).scroll_end(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
