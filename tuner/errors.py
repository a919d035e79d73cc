"""One base for every error tunelab reports to a user (issue 12 item 4, issue 19).

A :class:`TunelabError` is an expected failure: bad input, or a run that
failed for a reason tunelab understood. It carries the message a user reads,
an optional fix (what to do next) and the exit code the CLI ends with: 2 for
bad input (Click's own code for usage errors), 1 for a run that failed. The
top-level handlers (``tuner.crash.run_cli`` for the CLI, ``tui.cli`` for the
TUI) print it without a traceback; anything that is *not* a TunelabError is
a bug and gets a crash report instead (exit 70, ``EX_SOFTWARE`` in sysexits.h).

Subclasses keep their historic builtin base too (``class ConfigError(
TunelabError, ValueError)``), so existing ``except ValueError`` code still
works. This module imports nothing of tunelab's: every layer may use it.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_CRASH = 70  # sysexits.h EX_SOFTWARE: an internal error (a bug)


class TunelabError(Exception):
    """An error a user can act on: a message, a fix, an exit code.

    Args:
        message: What went wrong, in the user's terms (one line).
        *args: Kept for subclasses that pass more (as Exception does).
        fix: What to do about it, when the message does not already say.
        exit_code: Overrides the class's code for this one error.

    Attributes:
        exit_code: 2 (bad input) unless a subclass or the caller says 1 (run failed).
    """

    exit_code: int = EXIT_BAD_INPUT
    fix: str | None = None

    def __init__(
        self,
        message: object = "",
        *args: object,
        fix: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        super().__init__(message, *args)
        if fix is not None:
            self.fix = fix
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        """The user-facing text (``str()`` of the error, which subclasses may shape)."""
        return str(self)


class RunFailedError(TunelabError):
    """Base for failures of a run (engine, benchmark, server): exit code 1."""

    exit_code = EXIT_RUN_FAILED


def with_fix(exc: BaseException) -> str:
    """The error's message and, on a line of its own, its fix (``fix: ...``) where it has one.

    The one rendering of "what is wrong, what to do" that the faces print for any error that
    carries a ``fix`` (a :class:`TunelabError`, or a library error given one).
    """
    fix = getattr(exc, "fix", None)
    text = exc.message if isinstance(exc, TunelabError) else str(exc)
    return f"{text}\nfix: {fix}" if fix else text
