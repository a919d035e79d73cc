"""What the user of this process has allowed beyond plain data: ``--allow-code``, ``--allow-env``.

Consent is given on the command line of the process that starts engines (a CLI command, the
TUI, a service job's own command line) and holds for everything that process runs, whichever
face built the config: a sweep's points, a search's trials and a job spec's arms are checked
against the same consent as the config the user typed. It is never read from a file (a preset
or a job spec cannot grant itself ``--allow-code``). The faces call :func:`grant` once, from
their options; the trial runner and the engine read :func:`granted`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

ALLOW_CODE_OPTION = "--allow-code"
ALLOW_ENV_OPTION = "--allow-env"


@dataclass(frozen=True)
class Consent:
    """What the user allowed.

    Attributes:
        code: Engine arguments (and nested config fields) that load or run code, or that
            tunelab does not know to be plain data (``--allow-code``).
        env: Environment variable names allowed although tunelab does not know them to be
            plain data (``--allow-env NAME``, repeatable). Secrets are never allowed.
    """

    code: bool = False
    env: frozenset[str] = frozenset()

    @classmethod
    def of(cls, code: bool = False, env: Iterable[str] | None = ()) -> Consent:
        """A consent from the faces' option values (``env`` may be None: no names)."""
        return cls(code=bool(code), env=frozenset(env or ()))

    def merged(self, other: Consent) -> Consent:
        """Both consents together (an option given twice, by two layers of a face)."""
        return Consent(self.code or other.code, self.env | other.env)

    def flags(self) -> list[str]:
        """The command-line options that give this consent (for a job's own command line)."""
        out = [ALLOW_CODE_OPTION] if self.code else []
        for name in sorted(self.env):
            out += [ALLOW_ENV_OPTION, name]
        return out


NONE = Consent()
_granted: Consent = NONE


def grant(consent: Consent) -> None:
    """Records this process's consent (the faces call it once, from their options)."""
    global _granted
    _granted = consent


def granted() -> Consent:
    """This process's consent (nothing allowed until a face grants it)."""
    return _granted


@contextlib.contextmanager
def granting(consent: Consent) -> Iterator[Consent]:
    """``consent`` for the duration of a block, then what was granted before (tests, the TUI)."""
    before = granted()
    grant(consent)
    try:
        yield consent
    finally:
        grant(before)
