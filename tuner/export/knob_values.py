"""Typed values of a preset's ``[env]`` and ``[engine]`` tables, checked by the knob catalogue.

The catalogue (``tuner.knobs``) knows each knob's type, range and choices, so
a preset value is checked exactly as ``--set KEY=VALUE`` would be and
normalised the same way (switches in the environment become ``1``/``0``,
choices their canonical spelling). Environment names also pass the safety
policy of :mod:`tuner.export.env_policy`. Flags vLLM has but the catalogue
lacks pass through with a warning; near misses of catalogue keys are errors
(typos).
"""

from __future__ import annotations

import datetime as dt
import difflib
from typing import Any

import tuner.knobs as knobs
from tuner.bounded import loads as json_loads
from tuner.config import (
    ENGINE_KEY_RE,
    ENV_KEY_RE,
    RESERVED_ENGINE_KEYS,
    ConfigError,
    check_engine_key,
    env_string,
    expansions,
)
from tuner.export.errors import IssueCollector, describe
from tuner.policy import ALLOW_CODE_OPTION, Consent, engine_args, env_vars
from tuner.vllm_tables import table


def _serve_flags() -> frozenset[str]:
    """Every flag of the shipped vLLM table (``--no-`` forms included)."""
    return table().flag_names


def check_env_table(table: Any, out: IssueCollector, allow_env: frozenset[str]) -> dict[str, str]:
    """Checks ``[env]``: names against the policy, values against the catalogue.

    Returns:
        The variables as exported strings (switches normalised to ``1``/``0``,
        as ``--set`` does); refused or ill-typed entries are left out and
        reported to ``out``.
    """
    env: dict[str, str] = {}
    for key, value in table.items():
        path = ("env", key)
        if not ENV_KEY_RE.match(key):
            out.error(
                path,
                f"{key!r} is not an environment variable name",
                "use upper-case letters, digits and '_'",
            )
            continue
        if isinstance(value, dict | list | dt.date | dt.time):
            out.error(
                path,
                f"{key} must be a string, number or boolean, not {describe(value)}",
                f'write {key} = "1"',
            )
            continue
        text = env_string(value)
        verdict = env_vars.check(key, text, Consent.of(env=allow_env))
        if verdict is not None:
            out.error(path, verdict.message, verdict.fix)
            continue
        knob = knobs.get(key)
        if knob is None:
            out.warn(path, f"{key} is not in the knob catalogue; it is passed to vLLM as written")
            env[key] = text
            continue
        try:
            typed = knobs.coerce(key, text)
        except ConfigError as exc:
            out.error(path, str(exc), f'write {key} = "{_example(knob)}"')
            continue
        env[key] = text if str(knob.type) in ("str", "json") else env_string(typed)
    return env


def check_engine_table(table: Any, out: IssueCollector, allow_code: bool = False) -> dict[str, Any]:
    """Checks ``[engine]``: keys against the catalogue, values against each knob's type.

    Arguments the policy refuses (:mod:`tuner.policy.engine_args`: code, or not
    known to be data) are errors unless ``allow_code`` (the user's
    ``--allow-code``); then each is still named in a warning. Secret-bearing arguments and abbreviations of
    vLLM's flags are always errors.

    Returns:
        The typed engine arguments; bad entries are left out and reported to ``out``.
    """
    engine: dict[str, Any] = {}
    for key, value in table.items():
        path = ("engine", key)
        if _refuse_engine_key(key, value, path, out, allow_code):
            continue
        knob = knobs.get(key)
        if knob is None or knob.key != key:
            if _uncatalogued_engine_value(key, value, path, out):
                engine[key] = value
            continue
        typed = _typed_engine_value(knob, key, value, path, out)
        if typed is not None:
            engine[key] = typed
    return engine


def _refuse_engine_key(
    key: str, value: Any, path: tuple[str, ...], out: IssueCollector, allow_code: bool
) -> bool:
    """True (and an error in ``out``) when the key may not be in a preset at all.

    Key spelling, tunelab's own keys, TOML dates, abbreviations of vLLM's flags
    and the code policy; an allowed code-loading argument is still named in a warning.
    """
    if not ENGINE_KEY_RE.match(key):
        dashed = key.lower().replace("_", "-")
        out.error(
            path,
            f"{key!r} is not an engine argument key",
            f"write it as {dashed} (the vLLM flag without '--')",
        )
        return True
    if key in RESERVED_ENGINE_KEYS:
        fix = (
            "set the model in [target].model"
            if key == "model"
            else "the launch script takes HOST and PORT from the environment"
        )
        out.error(path, f"{key} is set by tunelab itself, not by a preset", fix)
        return True
    if isinstance(value, dt.date | dt.time):
        out.error(
            path, f"{key} cannot be a date or time", "write a number, string, boolean or table"
        )
        return True
    try:
        check_engine_key(key)
    except ConfigError as exc:
        full = expansions(key)
        fix = f"did you mean {full[0]}? write the full name" if full else "remove it"
        out.error(path, str(exc), fix)
        return True
    if _typo(key, path, out):
        return True
    refused = engine_args.check(key, value, Consent.of(code=allow_code))
    for item in refused:
        out.error(item.path, item.message, item.fix)
    if refused:
        return True
    if allow_code:
        for item in engine_args.check(key, value, Consent()):
            out.warn(item.path, f"{item.message}; allowed by {ALLOW_CODE_OPTION}")
    return False


def _typo(key: str, path: tuple[str, ...], out: IssueCollector) -> bool:
    """True (and an error) when ``key`` is no flag of vLLM's but a near miss of a catalogue key."""
    if knobs.get(key) is not None or key in _serve_flags():
        return False
    close = difflib.get_close_matches(key, list(knobs.keys()), n=1, cutoff=0.85)
    if close:
        out.error(path, f"unknown engine argument {key!r}", f"did you mean {close[0]}?")
        return True
    return False


def _uncatalogued_engine_value(
    key: str, value: Any, path: tuple[str, ...], out: IssueCollector
) -> bool:
    """True when a flag the catalogue lacks may pass to vLLM unchecked (with a warning).

    vLLM has far more flags than the catalogue (served-model-name,
    trust-remote-code...), but a near miss of a catalogue key is almost surely a typo.
    """
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        out.error(
            path, f"{key}: lists of tables are not engine arguments", "write a table or a flat list"
        )
        return False
    out.warn(
        path,
        f"{key} is not in the knob catalogue; it is passed to vLLM unchecked",
        "check the spelling against `vllm serve --help`",
    )
    return True


def _typed_engine_value(
    knob: Any, key: str, value: Any, path: tuple[str, ...], out: IssueCollector
) -> Any:
    kind = str(knob.type)
    example = _example(knob)
    if kind == "bool":
        if not isinstance(value, bool):
            out.error(
                path,
                f"{key} is a switch and must be true or false, not {describe(value)}",
                f"write {key} = true",
            )
            return None
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            out.error(
                path,
                f"{key} takes a whole number, not {describe(value)}",
                f"write {key} = {example} (no quotes)",
            )
            return None
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.error(
                path,
                f"{key} takes a number, not {describe(value)}",
                f"write {key} = {example} (no quotes)",
            )
            return None
        value = float(value)
    elif kind in ("str", "choice"):
        if not isinstance(value, str):
            out.error(
                path, f"{key} takes a string, not {describe(value)}", f'write {key} = "{example}"'
            )
            return None
    elif kind == "json":
        if isinstance(value, str):
            try:
                value = json_loads(value, what=key)
            except ValueError as exc:
                out.error(
                    path,
                    f"{key} is not valid JSON ({getattr(exc, 'msg', exc)})",
                    f"write it as a TOML table: [engine.{key}]",
                )
                return None
        if not isinstance(value, dict | list):
            out.error(
                path,
                f"{key} takes a table, not {describe(value)}",
                f"write it as a TOML table: [engine.{key}]",
            )
            return None
        return value
    try:
        typed = knobs.coerce(key, _text(value))
    except ConfigError as exc:
        out.error(path, str(exc), f"write {key} = {_toml_example(kind, example)}")
        return None
    if kind == "str":
        return value  # keep the exact text (coerce strips whitespace)
    return typed


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _example(knob: Any) -> str:
    if knob.choices:
        return str(knob.choices[0])
    if knob.default is not None and not isinstance(knob.default, dict | list):
        return _text(knob.default)
    return {"int": "8192", "float": "0.9", "bool": "1"}.get(str(knob.type), "VALUE")


def _toml_example(kind: str, example: str) -> str:
    return example if kind in ("int", "float") else f'"{example}"'
