"""The top-level handler: user errors as message + fix, bugs as a crash report file.

Issue 19 ("no traceback reaches a user, and no bug is hidden"): a
:class:`~tuner.errors.TunelabError` prints its message and fix and exits
with its code (2 bad input, 1 failed run); Ctrl-C exits 130 quietly; any
other exception is a bug: the full traceback goes into a file under
``data_dir()/crashes`` (with tunelab's and vLLM's versions, the command
line with secrets redacted, Python and platform) and the user sees one line
naming that file, exit code 70 (sysexits.h ``EX_SOFTWARE``). Click/Typer
usage errors never reach here: Typer's standalone mode prints and exits on
them first (typer/core.py ``_main``), and turns Ctrl-C into exit 130.
"""

from __future__ import annotations

import datetime
import importlib.metadata as md
import json
import os
import platform
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from tuner import __version__, paths
from tuner.cli.safe_text import clean
from tuner.errors import EXIT_CRASH, EXIT_INTERRUPTED, TunelabError
from tuner.redact import argv_secrets, environ_secrets, redact_argv, redact_text, scrub


def run_guarded(
    main: Callable[[], object], argv: Sequence[str], *, stderr: TextIO | None = None
) -> int:
    """Runs ``main`` and turns what escapes it into an exit code (never a traceback).

    Args:
        main: The CLI or TUI entry; a ``SystemExit`` it raises passes through.
        argv: The command line, for the crash report.
        stderr: Where the one-line messages go (default ``sys.stderr``).

    Returns:
        0 when ``main`` returned normally, else the exit code to end with.
    """
    err = stderr or sys.stderr
    try:
        main()
    except TunelabError as exc:
        print_error(exc, err)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one place a bug is caught: reported, not hidden
        path = write_crash_report(exc, argv)
        print(
            f"tunelab: internal error ({type(exc).__name__}); this is a bug. "
            f"The full report is in {path} — please attach it when reporting it.",
            file=err,
        )
        return EXIT_CRASH
    return 0


def print_error(exc: TunelabError, stream: TextIO) -> None:
    """The message and, when there is one, the fix; no traceback.

    Both may quote foreign text (a server's error, a file's content, a
    database driver's message with a DSN), so secrets are redacted and
    terminal escape sequences stripped first.
    """
    print(f"tunelab: error: {clean(redact_text(exc.message))}", file=stream)
    if exc.fix:
        print(f"fix: {clean(redact_text(exc.fix))}", file=stream)


def write_crash_report(exc: BaseException, argv: Sequence[str]) -> Path:
    """Writes the crash report file and returns its path (a temp dir if the data dir fails)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S-%f")
    name = f"crash-{stamp}-{os.getpid()}.txt"
    text = crash_text(exc, argv)
    for folder in (_crash_folder, lambda: Path(tempfile.gettempdir())):
        try:
            path = folder() / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            return path
        except OSError:
            continue
    return Path("<unwritable>")


def _crash_folder() -> Path:
    return paths.crash_dir()


def crash_text(exc: BaseException, argv: Sequence[str]) -> str:
    """The report: versions, command line (secrets redacted), platform, full traceback.

    The report is meant to be attached to a public bug report, so secrets go
    twice: by pattern (:func:`tuner.redact.redact_argv` and
    :func:`~tuner.redact.redact_text`: header values, URL passwords and
    tokens, DSN passwords) and by value: every secret found on the command
    line or in a secret-named environment variable is removed wherever the
    traceback quotes it (a library echoing a header value or a misparsed
    password out of its context).
    """
    secrets = argv_secrets(argv) | environ_secrets(os.environ)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    lines = [
        "tunelab crash report",
        f"time: {datetime.datetime.now(datetime.UTC).isoformat()}",
        f"tunelab: {__version__}",
        f"vLLM: {vllm_version()}",
        f"command: {' '.join(_redact_command(argv))}",
        f"python: {sys.version.split()[0]} ({sys.executable})",
        f"platform: {platform.platform()}",
        "",
        redact_text(scrub(tb, secrets)),
    ]
    return scrub("\n".join(lines), secrets)


def _redact_command(argv: Sequence[str]) -> list[str]:
    """The command line without secrets (:func:`tuner.redact.redact_argv`: ``--header``
    values, credential flags, secret ``--set KEY=VALUE`` items, URL passwords and tokens)."""
    return ["tunelab", *redact_argv(list(argv))]


def vllm_version() -> str:
    """vLLM's version without importing it: package metadata here, else the introspection cache."""
    try:
        for dist in md.packages_distributions().get("vllm", []):
            return f"{md.version(dist)} ({dist}, this interpreter)"
    except Exception:  # a broken metadata tree must not hide the crash
        pass
    try:
        cached = sorted(
            (paths.cache_dir() / "introspect").glob("*.json"), key=lambda p: p.stat().st_mtime
        )
        if cached:
            data = json.loads(cached[-1].read_text())
            return f"{data.get('version')} (introspection cache)"
    except (OSError, ValueError):
        pass
    return "unknown (not installed beside tunelab)"
