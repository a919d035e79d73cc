"""What the guard asks and how strictly it judges: one typed value from the faces to the runner.

A :class:`GuardSettings` is built where the user's options are read (the CLI's
``--guard-prompts FILE`` / ``--guard-tokens N``, the TUI's run options) and is
handed unchanged through ``tuner.lab.run`` and the studies' trial runner to
``tuner.trials.runner``. The prompts file is read and checked when the
settings are built, not when the first trial's engine is already up: a bad
file is a :class:`GuardSettingsError` (message + fix) before any engine starts,
and every trial of a study asks exactly the same probes even if the file is
edited meanwhile.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from tuner.bounded import MIB, InputTooLargeError, NotAFileError, loads, read_text
from tuner.errors import TunelabError
from tuner.guard.compare import Thresholds
from tuner.guard.probes import BUILTIN_PROBES, DEFAULT_GUARD_TOKENS

# Bounds that keep the guard a matter of seconds, not a second benchmark.
MAX_GUARD_TOKENS = 256
MAX_GUARD_PROMPTS = 256
MAX_PROMPT_CHARS = 8192
# 256 prompts of 8192 characters are ~2 MiB of ASCII; 4 MiB leaves room for UTF-8.
MAX_FILE_BYTES = 4 * MIB

_FILE_FIX = (
    "give a UTF-8 text file with one prompt per line (blank lines are skipped), "
    'or a JSON list of strings such as ["The capital of France is", "def f(x):"]'
)


class GuardSettingsError(TunelabError, ValueError):
    """A guard option the user gave cannot be used (bad prompts file, token count, threshold)."""


def _fail(message: str, fix: str = _FILE_FIX) -> GuardSettingsError:
    return GuardSettingsError(message, fix=fix)


def _parse_prompts(path: Path, text: str) -> list[str]:
    """The file's prompts: a JSON list when it starts with ``[``, else one per non-blank line."""
    if text.lstrip().startswith("["):
        try:
            data = loads(text, what="guard prompts file")
        except InputTooLargeError:
            raise _fail(f"guard prompts file {path}: the JSON nests too deeply") from None
        except json.JSONDecodeError as exc:
            raise _fail(
                f"guard prompts file {path}: not valid JSON (line {exc.lineno}: {exc.msg})"
            ) from None
        if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
            raise _fail(f"guard prompts file {path}: the JSON list must hold only strings")
        blank = next((i for i, p in enumerate(data, 1) if not p.strip()), None)
        if blank is not None:
            raise _fail(f"guard prompts file {path}: prompt {blank} of the JSON list is empty")
        return list(data)
    return [line for line in text.splitlines() if line.strip()]


def _read(path: Path) -> str:
    """The file's text through tuner.bounded: a regular file of at most MAX_FILE_BYTES.

    A reported size is no bound (``/dev/zero``, a FIFO, ``/proc`` files report
    0), so the bytes are counted while reading and anything but a regular file
    is refused before a byte is read (a FIFO never blocks the command).
    """
    try:
        return read_text(path, max_bytes=MAX_FILE_BYTES, what="guard prompts file")
    except NotAFileError as exc:
        raise _fail(f"{exc.message}; tunelab reads only regular files") from None
    except InputTooLargeError:
        raise _fail(
            f"guard prompts file {path} is larger than {MAX_FILE_BYTES // MIB} MiB; at most "
            f"{MAX_GUARD_PROMPTS} prompts of {MAX_PROMPT_CHARS} characters are asked"
        ) from None
    except UnicodeDecodeError:
        raise _fail(f"guard prompts file {path} is not UTF-8 text") from None
    except (OSError, ValueError) as exc:  # missing, permissions, a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise _fail(
            f"cannot read guard prompts file {path}: {reason}",
            fix="check the path and its permissions; " + _FILE_FIX,
        ) from None


def load_prompts(path: Path) -> tuple[str, ...]:
    """The probe prompts of a user's file, checked.

    Why strict: a probe set is compared prompt by prompt with the baseline's,
    so an empty, duplicated or oversized set would make every verdict
    "unknown" or the guard slow; better to say so before an engine starts.

    Raises:
        GuardSettingsError: unreadable, not UTF-8, empty, duplicated or too large.
    """
    prompts = _parse_prompts(path, _read(path))
    if not prompts:
        raise _fail(f"guard prompts file {path} holds no prompt")
    if len(prompts) > MAX_GUARD_PROMPTS:
        raise _fail(
            f"guard prompts file {path} holds {len(prompts)} prompts; at most "
            f"{MAX_GUARD_PROMPTS} (the guard runs after every trial and should take seconds)"
        )
    seen: dict[str, int] = {}
    for i, prompt in enumerate(prompts, 1):
        if len(prompt) > MAX_PROMPT_CHARS:
            raise _fail(
                f"guard prompts file {path}: prompt {i} has {len(prompt)} characters; "
                f"at most {MAX_PROMPT_CHARS}"
            )
        if prompt in seen:
            raise _fail(f"guard prompts file {path}: prompt {i} repeats prompt {seen[prompt]}")
        seen[prompt] = i
    return tuple(prompts)


@dataclass(frozen=True)
class GuardSettings:
    """How the output-drift guard runs after each measured run, and how it judges.

    Args:
        enabled: Run the guard at all (off: the trial records no guard).
        prompts_file: The user's probe prompts (``--guard-prompts``); None: the
            built-in set (tuner.guard.probes.BUILTIN_PROBES).
        tokens: Greedy tokens per probe (``--guard-tokens``), 1..MAX_GUARD_TOKENS.
        thresholds: Where close ends and drifted begins (docs/guard.md). They
            are recorded with each guard run, so the verdict a trial gets later
            uses the thresholds it was run with unless a caller passes others.

    Attributes:
        probes: The prompts the guard asks, read from ``prompts_file`` once, here.

    Raises:
        GuardSettingsError: A bad prompts file, token count or threshold.
    """

    enabled: bool = True
    prompts_file: Path | None = None
    tokens: int = DEFAULT_GUARD_TOKENS
    thresholds: Thresholds = field(default_factory=Thresholds)
    probes: tuple[str, ...] = field(init=False, default=BUILTIN_PROBES)

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int):
            raise _fail(
                f"--guard-tokens must be a whole number, got {self.tokens!r}",
                fix=f"give 1..{MAX_GUARD_TOKENS} (default {DEFAULT_GUARD_TOKENS})",
            )
        if not 1 <= self.tokens <= MAX_GUARD_TOKENS:
            raise _fail(
                f"--guard-tokens {self.tokens} is out of range",
                fix=f"give 1..{MAX_GUARD_TOKENS} (default {DEFAULT_GUARD_TOKENS}); each token "
                "costs a decode step per probe after every trial",
            )
        check_thresholds(self.thresholds)
        if self.prompts_file is not None:
            object.__setattr__(self, "probes", load_prompts(Path(self.prompts_file)))

    @classmethod
    def off(cls) -> GuardSettings:
        """No guard (``run_trial(..., guard=False)``)."""
        return cls(enabled=False)


def check_thresholds(th: Thresholds) -> None:
    """Refuse thresholds that cannot mean anything (negative, NaN, a fraction over 1).

    Raises:
        GuardSettingsError: with the allowed range as the fix.
    """
    frac, drift = th.max_diverged_fraction, th.max_mean_abs_dlogprob
    if not (isinstance(frac, int | float) and math.isfinite(frac) and 0.0 <= frac <= 1.0):
        raise _fail(
            f"guard threshold max_diverged_fraction={frac!r} is not a fraction",
            fix="give 0.0..1.0 (default 0.0: any changed greedy answer is drift)",
        )
    if not (isinstance(drift, int | float) and math.isfinite(drift) and drift >= 0.0):
        raise _fail(
            f"guard threshold max_mean_abs_dlogprob={drift!r} is not a non-negative number",
            fix="give nats per token, e.g. 0.05 (the default)",
        )
