"""The one policy on what a config may make an engine do: plain data only, unless the user says.

A config comes from many places — a shared preset, ``--set`` items, a sweep's ``--param``
values, a search space, an ablation's steps, a TUI's knobs, a job spec written by the TUI, a
trial stored long ago — and every one of them ends as an engine. So the policy is applied
where a config becomes an engine (the trial runner's checks, and :class:`tuner.engine.Engine`
itself before it starts a process), whatever built it, and the faces call the same function
earlier to refuse bad input before any work. Imports, exports and the rules show the same
refusals because they ask the same function.

- :func:`violations`: every refusal for a config under a consent (empty: allowed);
- :func:`enforce`: raises :class:`PolicyError` when there is any;
- :mod:`tuner.policy.consent`: what the user of this process allowed (``--allow-code``,
  ``--allow-env NAME``), granted once by the face;
- :mod:`tuner.policy.env_vars` and :mod:`tuner.policy.engine_args`: the allowlists.

docs/reliability.md §Presets are data states what the policy allows.
"""

from __future__ import annotations

from tuner.config import EngineConfig
from tuner.policy import engine_args, env_vars
from tuner.policy.consent import (
    ALLOW_CODE_OPTION,
    ALLOW_ENV_OPTION,
    Consent,
    grant,
    granted,
    granting,
)
from tuner.policy.violation import PolicyError, Violation

__all__ = [
    "ALLOW_CODE_OPTION",
    "ALLOW_ENV_OPTION",
    "Consent",
    "PolicyError",
    "Violation",
    "enforce",
    "grant",
    "granted",
    "granting",
    "violations",
]


def violations(
    config: EngineConfig, consent: Consent | None = None, vllm_version: str | None = None
) -> list[Violation]:
    """Every setting of ``config`` the policy refuses under ``consent`` (default: this process's).

    Args:
        config: The config about to become an engine (or a preset, a script ...).
        consent: What the user allowed; None reads :func:`granted`.
        vllm_version: The release whose declarations decide (default: the shipped table).
    """
    allowed = granted() if consent is None else consent
    found: list[Violation] = []
    for name in sorted(config.env):
        verdict = env_vars.check(name, config.env[name], allowed, vllm_version)
        if verdict is not None:
            found.append(verdict)
    for key in sorted(config.engine):
        found += engine_args.check(key, config.engine[key], allowed, vllm_version)
    return found


def enforce(config: EngineConfig, consent: Consent | None = None) -> None:
    """Raises :class:`PolicyError` when ``config`` may not become an engine under ``consent``."""
    found = violations(config, consent)
    if found:
        raise PolicyError(found)
