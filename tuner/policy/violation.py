"""One refusal of the policy, and the error that carries several.

A violation names the setting (``env.LD_PRELOAD``, ``engine.compilation-config.
inductor_compile_config``), says why it may not reach an engine and how to proceed. Its kind
says which consent lifts it: ``code`` (``--allow-code``), ``env`` (``--allow-env NAME``) or
``secret`` (nothing: a secret never goes into a config tunelab stores or writes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tuner.errors import TunelabError

Kind = Literal["code", "env", "secret"]


@dataclass(frozen=True)
class Violation:
    """One setting the policy refuses.

    Attributes:
        table: ``env`` or ``engine``.
        key: The variable, or the engine argument with a dotted path into its JSON value.
        message: Why it is refused (what it would make the engine do).
        fix: What the user can do.
        kind: Which consent lifts it (see the module docstring).
    """

    table: Literal["env", "engine"]
    key: str
    message: str
    fix: str
    kind: Kind

    @property
    def path(self) -> tuple[str, ...]:
        """The key path in a preset (``("engine", "compilation-config", "cache_dir")``)."""
        return (self.table, *self.key.split("."))

    @property
    def knob(self) -> str:
        """The top-level knob it belongs to (what a fix removes)."""
        return self.key.split(".")[0]


class PolicyError(TunelabError):
    """A config that may not reach an engine without the user's consent; nothing was started."""

    def __init__(self, violations: Sequence[Violation]) -> None:
        self.violations = list(violations)
        first = self.violations[0]
        more = f" (and {len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
        text = "; ".join(f"{v.message}" for v in self.violations[:4])
        super().__init__(f"refused by tunelab's policy: {text}{more}", fix=first.fix)
