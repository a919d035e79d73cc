"""A terminal driver whose input thread sleeps while nobody types.

Textual's ``LinuxDriver`` reads keys in a thread that polls the terminal every
0.1 s, whether or not a key came: ten wakes a second, for as long as the TUI
is open on an SSH session nobody is looking at (about a fifth of the idle
TUI's CPU, issue 32). The poll exists for two reasons: to notice the stop
request (``exit_event``), and to let the key parser time out a lone Escape
(``ESCDELAY``, 100 ms by default) when no more bytes follow it. This driver
keeps both without the idle wakes: the stop request also writes to a pipe the
input thread waits on, and the 0.1 s poll runs only for a short while after
the last input, long enough for any parser timeout to fire. Everything else —
parsing, mouse, resize, suspend — is Textual's.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time
from codecs import getincrementaldecoder
from typing import TYPE_CHECKING, Any

from textual import constants
from textual._loop import loop_last
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

if TYPE_CHECKING:
    from textual.app import App

POLL_S = 0.1
"""Textual's own poll period, kept while a parser timeout may be pending."""


def poll_window_s() -> float:
    """How long after the last input the thread keeps polling.

    Ten times the Escape delay and at least a second: the parser's only
    timeout (a lone Escape, or an unfinished sequence) is shorter than that.
    """
    return max(1.0, 10 * constants.ESCAPE_DELAY)


class _WakingEvent(threading.Event):
    """An event that also wakes a thread blocked in ``select`` on a pipe."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd = wake_fd
        """The pipe's write end; -1 once closed (never write to a reused number)."""

    def set(self) -> None:
        super().set()
        if self.wake_fd >= 0:
            # Full: the thread has bytes to wake on already.
            with contextlib.suppress(BlockingIOError):
                os.write(self.wake_fd, b"x")


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` with an input thread that blocks until input or a stop."""

    def __init__(self, app: App[Any], **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._waking = _WakingEvent(self._wake_w)
        self.exit_event = self._waking

    def close(self) -> None:
        super().close()
        if self._waking.wake_fd < 0:  # closed already
            return
        self._waking.wake_fd = -1
        os.close(self._wake_w)
        os.close(self._wake_r)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 64):
                pass
        except (BlockingIOError, OSError):
            pass

    def run_input_thread(self) -> None:
        """Wait for input and dispatch events; idle waits wake nobody."""
        selector = selectors.DefaultSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        fileno = self.fileno
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        window = poll_window_s()
        last_input = time.monotonic()

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> bool:
            """Feed what the terminal sent to the parser; True if anything came."""
            ttys = [(key, mask) for key, mask in events if key.fd == fileno]
            for last, (_key, mask) in loop_last(ttys):
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4), final=final and last)
                    if not data:  # stdin is a pipe at its end
                        break
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)
            return bool(ttys)

        try:
            while not self.exit_event.is_set():
                recent = time.monotonic() - last_input < window
                events = selector.select(POLL_S if recent else None)
                self._drain_wake()
                if process(events):
                    last_input = time.monotonic()
            selector.unregister(fileno)
            process(selector.select(POLL_S), final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass
