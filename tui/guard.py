"""The TUI under the top-level handler: an escaping exception is not a Textual traceback.

Textual's default for an exception nothing handled (``App._handle_exception``
in textual/app.py) is to exit with return code 1 and print a full Rich
traceback with locals to the terminal (``_fatal_error``). tunelab wants the
same outcome as its CLI (issue 19): a TunelabError shown as message + fix, a
bug written to a crash report file and named in one line, exit 70. So the
app records the first such exception, exits cleanly (no exit renderables),
and :func:`run_tui` re-raises it after the terminal is restored, where
``tuner.crash.run_guarded`` deals with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tui.app import TunelabApp
from tuner.errors import EXIT_CRASH, TunelabError

if TYPE_CHECKING:
    from tuner.rules import Target


class GuardedTunelabApp(TunelabApp):
    """TunelabApp whose unhandled exceptions end the app quietly and are re-raised by run_tui."""

    escaped: Exception | None = None

    def _handle_exception(self, error: Exception) -> None:
        # Overrides Textual's handler (textual/app.py App._handle_exception):
        # keep the first error, exit without queuing a traceback renderable.
        if self.escaped is None:
            self.escaped = error
        code = error.exit_code if isinstance(error, TunelabError) else EXIT_CRASH
        self.exit(return_code=code)


def run_tui(
    model: str | None = None,
    preset: Path | None = None,
    *,
    allow_code: bool = False,
    preview: Target | None = None,
) -> None:
    """Runs the TUI; an exception that escaped it is raised here, after the screen is restored.

    ``preview``: another node's target the rules judge against (``--gpu`` ...).
    """
    app = GuardedTunelabApp(model=model, preset=preset, allow_code=allow_code, preview=preview)
    app.run()
    if app.escaped is not None:
        raise app.escaped
