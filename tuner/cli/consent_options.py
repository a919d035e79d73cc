"""The options that give consent beyond plain data, shared by every command that starts engines.

``--allow-code`` and ``--allow-env NAME`` are the user's say-so for what tunelab's policy
(:mod:`tuner.policy`) refuses by default. A command declares both and calls
:func:`grant_consent` first, so everything it runs — whoever built the config — is checked
against the same consent where the engine starts. Kept apart from :mod:`tuner.cli.options`
so light commands (``jobs run-spec``) and the TUI's entry take them without loading the study
stack; the policy itself loads only when a command grants consent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from tuner.policy import Consent

AllowCodeOpt = Annotated[
    bool,
    typer.Option(
        "--allow-code",
        help="Accept engine arguments (and fields of JSON-valued ones) that load or run code "
        "or that tunelab does not know to be plain data (trust-remote-code, "
        "tool-parser-plugin, compilation-config.inductor_compile_config, ...): only for "
        "configs you trust.",
    ),
]
AllowEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-env",
        metavar="NAME",
        help="Accept the environment variable NAME although tunelab does not know it to be "
        "plain data (LD_PRELOAD, TORCHINDUCTOR_*, ...; repeatable): only for configs you "
        "trust. Secrets are never accepted.",
    ),
]


def grant_consent(allow_code: bool = False, allow_env: list[str] | None = None) -> Consent:
    """This command's ``--allow-code``/``--allow-env``, granted for everything it runs.

    Added to what the process was granted already (tuner.policy.consent): every config the
    command builds or runs — preset, ``--set`` items, sweep points, search trials — meets
    the policy under it, here and where the engine starts.
    """
    from tuner import policy  # deferred: `tunelab --help` and the TUI's entry stay light

    given = policy.granted().merged(policy.Consent.of(allow_code, allow_env))
    policy.grant(given)
    return given
