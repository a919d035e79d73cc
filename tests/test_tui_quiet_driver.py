"""The TUI's terminal driver: keys and a lone Escape still arrive, an idle thread sleeps.

The driver's input thread runs for real on a pseudo-terminal (``os.openpty``);
the app it posts to is a recorder (the driver's only call into the app is
``_post_message``). Wakes are counted from the kernel's own count of the
thread's voluntary context switches (``/proc/self/task/TID/status``), so the
test asserts what the idle benchmark measures, without timing anything.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import tty
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver

from tui.app import TunelabApp
from tui.quiet_driver import QuietLinuxDriver, poll_window_s

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


class _Recorder:
    """Stands for the app: keeps what the driver posts."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def _post_message(self, message: Any) -> bool:
        if isinstance(message, events.Key):
            self.keys.append(message.key)
        return True


def _wakes(tid: int) -> int:
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("voluntary_ctxt_switches"))
    return int(line.split()[1])


async def _until(check: Any, limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "the driver never delivered it"
        await asyncio.sleep(0.02)


async def _start(
    driver_class: type[LinuxDriver],
) -> tuple[LinuxDriver, _Recorder, int, threading.Thread]:
    recorder = _Recorder()
    driver = driver_class(recorder, debug=False)  # type: ignore[arg-type]
    master, slave = os.openpty()
    tty.setraw(slave)  # as Textual's start_application_mode does: bytes, not lines
    driver.fileno = slave
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    await asyncio.sleep(0.05)
    return driver, recorder, master, thread


@pytest.fixture(autouse=True)
def _signals() -> Any:
    """LinuxDriver installs SIGTSTP/SIGCONT handlers; put pytest's back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


async def _idle_wakes(driver_class: type[LinuxDriver], idle_s: float) -> int:
    driver, _recorder, master, thread = await _start(driver_class)
    assert thread.native_id is not None
    await asyncio.sleep(poll_window_s() + 0.2)  # past the poll after the (absent) last input
    before = _wakes(thread.native_id)
    await asyncio.sleep(idle_s)
    wakes = _wakes(thread.native_id) - before
    driver.exit_event.set()
    thread.join(5)
    os.close(master)
    os.close(driver.fileno)
    return wakes


async def test_an_idle_input_thread_sleeps_where_textuals_polls() -> None:
    quiet = await _idle_wakes(QuietLinuxDriver, 1.5)
    polling = await _idle_wakes(LinuxDriver, 1.5)
    assert polling >= 8, f"Textual's driver polls at 10 Hz; measured {polling} wakes in 1.5 s"
    assert quiet <= 1, f"the quiet driver woke {quiet} times in 1.5 s of no input"


async def test_keys_and_a_lone_escape_arrive_and_the_stop_is_prompt() -> None:
    driver, recorder, master, thread = await _start(QuietLinuxDriver)
    await asyncio.sleep(poll_window_s() + 0.2)  # the thread is in its blocking wait
    os.write(master, b"a")
    await _until(lambda: recorder.keys == ["a"])
    await asyncio.sleep(poll_window_s() + 0.2)
    # A lone Escape is only known as one when no byte follows within ESCDELAY:
    # the parser's timeout must still fire after the thread had gone to sleep.
    os.write(master, b"\x1b")
    await _until(lambda: recorder.keys == ["a", "escape"])
    await asyncio.sleep(poll_window_s() + 0.2)
    t0 = time.monotonic()
    driver.exit_event.set()  # what Textual's disable_input does, then it joins
    thread.join(5)
    assert not thread.is_alive(), "the input thread did not stop"
    assert time.monotonic() - t0 < 1.0
    driver.exit_event.clear()
    driver.close()
    driver.close()  # Textual's shutdown may close twice; the pipe is closed once
    driver.exit_event.set()  # after close: nothing is written to a reused descriptor
    os.close(master)
    os.close(driver.fileno)


def test_the_app_runs_on_the_quiet_driver_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textual import constants

    monkeypatch.setattr(constants, "DRIVER", None)
    assert TunelabApp.get_driver_class(TunelabApp.__new__(TunelabApp)) is QuietLinuxDriver
    monkeypatch.setattr(constants, "DRIVER", "textual.drivers.headless_driver:HeadlessDriver")
    chosen = TunelabApp.get_driver_class(TunelabApp.__new__(TunelabApp))
    assert chosen.__name__ == "HeadlessDriver"
