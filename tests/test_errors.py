"""The one top-level handler (issues 12 and 19): user errors as message + fix, bugs as a crash file.

Each case runs the real ``tunelab`` entry point (``tui.cli.main``) in-process
with one command's core function replaced by one that raises, and checks
what a user would see: the exit code, the lines on stderr, and the crash
report file written under the data dir.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
from pathlib import Path

import pytest

import tuner
from tests.support import tui_harness
from tui import cli as tui_cli
from tuner import paths
from tuner.crash import crash_text
from tuner.engine.server import EngineStartError
from tuner.errors import TunelabError
from tuner.trials.store import TrialStore


def _main(argv: list[str]) -> int:
    try:
        tui_cli.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _crash_files() -> list[Path]:
    return sorted(paths.crash_dir().glob("crash-*.txt"))


def _raise(exc: BaseException):  # type: ignore[no-untyped-def]
    def boom(*_args: object, **_kwargs: object) -> None:
        raise exc

    return boom


def test_an_unexpected_exception_is_one_line_exit_70_and_a_crash_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(TrialStore, "scan", _raise(ZeroDivisionError("canary-bug-7431")))
    code = _main(["results", "--json", "--study", "http://alice:CANARYPW@db.example/x"])
    out, err = capsys.readouterr()
    assert code == 70
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "internal error (ZeroDivisionError)" in lines[0]
    assert "Traceback" not in out + err and "canary-bug-7431" not in out + err
    (crash,) = _crash_files()
    assert str(crash) in lines[0]
    text = crash.read_text()
    assert "Traceback (most recent call last)" in text
    assert "ZeroDivisionError: canary-bug-7431" in text
    assert "in boom" in text  # the frame that raised
    assert f"tunelab: {tuner.__version__}" in text
    assert "vLLM: " in text and "python: " in text and "platform: " in text
    assert "command: tunelab results --json --study http://alice:***@db.example/x" in text
    assert "CANARYPW" not in text


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (TunelabError("the canary message", fix="do the canary fix"), 2),
        (EngineStartError("the engine canary failed", []), 1),
    ],
    ids=["bad-input", "failed-run"],
)
def test_a_tunelab_error_is_message_and_fix_without_traceback(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: TunelabError,
    code: int,
) -> None:
    monkeypatch.setattr(TrialStore, "scan", _raise(exc))
    assert _main(["results"]) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert f"tunelab: error: {exc.message}" in err
    if exc.fix:
        assert "fix: do the canary fix" in err
    assert _crash_files() == []


def test_usage_errors_keep_clicks_behaviour(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["results", "--no-such-option"]) == 2
    _, err = capsys.readouterr()
    assert "No such option" in err and "Traceback" not in err
    assert _crash_files() == []


def test_ctrl_c_exits_130_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(TrialStore, "scan", _raise(KeyboardInterrupt()))
    assert _main(["results"]) == 130
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    assert _crash_files() == []


def test_every_exception_class_of_tunelab_is_a_tunelab_error() -> None:
    """Issue 12: one base. Walks every module of tuner/ and tui/ for public *Error classes."""
    import tui

    missing = []
    for pkg in (tuner, tui):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith("__main__"):  # runs the program when imported
                continue
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if (
                    isinstance(obj, type)
                    and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__
                    and not name.startswith("_")
                    and not issubclass(obj, TunelabError)
                ):
                    missing.append(f"{module.__name__}.{name}")
    assert missing == []


def test_crash_text_without_vllm_metadata_still_names_a_version() -> None:
    try:
        raise RuntimeError("x")
    except RuntimeError as exc:
        text = crash_text(exc, ["doctor"])
    assert "vLLM: " in text.splitlines()[3] and "command: tunelab doctor" in text


async def test_an_exception_escaping_the_tui_is_recorded_not_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual would print a traceback with locals; the guarded app exits 70 and keeps the error."""
    from tui.guard import GuardedTunelabApp

    app = GuardedTunelabApp(services=tui_harness.services())
    async with app.run_test():
        app.call_later(_raise(ValueError("tui-canary")))
        for _ in range(200):
            if app.escaped is not None:
                break
            await asyncio.sleep(0.05)
    assert isinstance(app.escaped, ValueError) and str(app.escaped) == "tui-canary"
    assert app.return_code == 70
    assert app._exit_renderables == []  # nothing queued for Textual to print


def test_tunelab_tui_crash_goes_through_the_handler(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tunelab tui` whose app crashes: one line, exit 70, crash file with the traceback."""
    import tui.guard

    def run(self: tui.guard.GuardedTunelabApp) -> None:  # headless: no terminal in tests
        self._handle_exception(RuntimeError("tui-crash-canary"))

    monkeypatch.setattr(tui.guard.GuardedTunelabApp, "run", run)
    assert _main(["tui"]) == 70
    _, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "internal error (RuntimeError)" in err
    (crash,) = _crash_files()
    assert "RuntimeError: tui-crash-canary" in crash.read_text()
