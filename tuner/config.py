"""An engine configuration: the model plus knob values, and how it renders.

A config is the single thing that is benchmarked and exported. It renders to
the environment and the argv of ``vllm serve`` here, and nowhere else, so the
launch script that ships is built by the same code as the engine that was
measured. Keys are the catalogue's keys: environment variable names
(``VLLM_ROCM_USE_AITER``) for ``env`` and vLLM flags without dashes
(``max-num-batched-tokens``) for ``engine``; ``cudagraph-mode`` is folded into
``--compilation-config``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.bounded import loads as json_loads
from tuner.errors import TunelabError
from tuner.redact import SECRET_ENGINE_ARGS
from tuner.vllm_tables import table as vllm_table

EngineValue = str | int | float | bool | dict[str, Any] | list[Any]

# \Z, not $: "$" also matches before a trailing newline ("NAME\n" would pass).
ENV_KEY_RE = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
ENGINE_KEY_RE = re.compile(r"[a-z0-9][a-z0-9-]*\Z")

# Engine keys that tunelab itself controls for a benchmark run; a config may
# not set them (the launch script exposes them as HOST/PORT instead).
RESERVED_ENGINE_KEYS = frozenset({"host", "port", "model"})

# Keys folded into --compilation-config as the named field.
COMPILATION_FIELDS = {"cudagraph-mode": "cudagraph_mode"}


class ConfigError(TunelabError, ValueError):
    """A config or a KEY=VALUE that cannot be used; the message says how to fix it."""


@dataclass
class EngineConfig:
    """A model plus the knob values that differ from vLLM's defaults.

    Attributes:
        model: Model id (``org/name``) or local path, as ``vllm serve`` takes it.
        env: Environment variables, by name, as strings (exactly what is exported).
        engine: Engine arguments keyed by flag name without dashes, as typed values.
    """

    model: str
    env: dict[str, str] = field(default_factory=dict)
    engine: dict[str, EngineValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.model = check_model(self.model)
        _refuse_nul(self.model, self.env, self.engine)
        for key in self.env:
            if not ENV_KEY_RE.match(key):
                raise ConfigError(
                    f"environment variable name {key!r} is not valid: use letters, digits "
                    "and '_' (for example VLLM_ROCM_USE_AITER)"
                )
        for key in self.engine:
            if not ENGINE_KEY_RE.match(key):
                raise ConfigError(
                    f"engine argument {key!r} is not valid: use the vLLM flag without its "
                    "leading dashes, in lower case (for example max-num-batched-tokens)"
                )
            if key in RESERVED_ENGINE_KEYS:
                raise ConfigError(
                    f"engine argument {key!r} is set by tunelab itself; set the model with "
                    "--model and host/port with the launch script's HOST/PORT variables"
                )
            check_engine_key(key)
            if self.engine[key] == "--":
                # argparse strips a lone "--" from an option's values, even in
                # "--key=--" (Python 3.11 argparse _get_values): vLLM would get [].
                raise ConfigError(
                    f"engine argument {key!r} cannot be '--': vLLM's parser drops that value"
                )

    # -- identity -------------------------------------------------------
    def canonical(self) -> dict[str, Any]:
        """A JSON-able form with sorted keys: what 'the same config' means."""
        return {
            "model": self.model,
            "env": dict(sorted(self.env.items())),
            "engine": dict(sorted(self.engine.items())),
        }

    @property
    def config_id(self) -> str:
        """A stable 12-hex id: equal configs (any key order) share it."""
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def with_values(self, values: Mapping[str, EngineValue | None]) -> EngineConfig:
        """A copy with ``values`` applied (env or engine by the key's shape); None removes."""
        env = dict(self.env)
        engine = dict(self.engine)
        for key, value in values.items():
            target: dict[str, Any] = env if is_env_key(key) else engine
            if value is None:
                target.pop(key, None)
            elif target is env:
                env[key] = env_string(value)
            else:
                engine[key] = value
        return EngineConfig(model=self.model, env=env, engine=engine)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of a knob by catalogue key, from env or engine."""
        if is_env_key(key):
            return self.env.get(key, default)
        return self.engine.get(key, default)

    # -- rendering ------------------------------------------------------
    def engine_args(self) -> list[str]:
        """The argv after ``vllm serve MODEL``; deterministic order (sorted keys)."""
        args: list[str] = []
        compilation: dict[str, Any] = {}
        raw_comp = self.engine.get("compilation-config")
        if isinstance(raw_comp, dict):
            compilation.update(raw_comp)
        elif isinstance(raw_comp, str) and raw_comp.strip():
            try:
                parsed = json_loads(raw_comp, what="compilation-config")
            except ValueError as exc:
                raise ConfigError(
                    f"compilation-config is not valid JSON ({getattr(exc, 'msg', exc)}); write "
                    "it as a TOML table or a JSON object"
                ) from None
            if not isinstance(parsed, dict):
                raise ConfigError("compilation-config must be a JSON object")
            compilation.update(parsed)
        for key, fieldname in COMPILATION_FIELDS.items():
            if key in self.engine:
                compilation[fieldname] = self.engine[key]
        for key in sorted(self.engine):
            if key == "compilation-config" or key in COMPILATION_FIELDS:
                continue
            args.extend(render_flag(key, self.engine[key]))
        if compilation:
            args.extend(
                render_flag("compilation-config", compilation),
            )
        return args

    def serve_args(self) -> list[str]:
        """``MODEL`` followed by the engine args: what follows ``vllm serve``."""
        return [self.model, *self.engine_args()]

    def env_vars(self) -> dict[str, str]:
        """The exact variables to export, sorted."""
        return dict(sorted(self.env.items()))


def render_flag(key: str, value: EngineValue) -> list[str]:
    """One engine argument as one argv item: ``--key=value``, or ``--flag``/``--no-flag``.

    The value is joined to its flag with ``=`` so argparse can never read it
    as an option of its own: ``--served-model-name --trust-remote-code`` would
    turn remote code on, ``--served-model-name=--trust-remote-code`` names the
    model "--trust-remote-code" (argparse takes everything after the first
    ``=`` as the value; vLLM's FlexibleArgumentParser only rewrites the part
    before it, vllm/utils/argparse_utils.py parse_args). Booleans use vLLM's
    BooleanOptionalAction forms.
    """
    if isinstance(value, bool):
        return [f"--{key}"] if value else [f"--no-{key}"]
    if isinstance(value, dict | list):
        return [f"--{key}={json.dumps(value, sort_keys=True, separators=(',', ':'))}"]
    return [f"--{key}={value}"]


def _refuse_nul(*values: Any) -> None:
    """No process can receive a NUL byte in its argv or environment (exec refuses it)."""

    def has_nul(value: Any) -> bool:
        if isinstance(value, str):
            return "\x00" in value
        if isinstance(value, dict):
            return any(has_nul(k) or has_nul(v) for k, v in value.items())
        if isinstance(value, list | tuple):
            return any(has_nul(v) for v in value)
        return False

    if any(has_nul(v) for v in values):
        raise ConfigError(
            "the config holds a NUL byte (\\u0000), which no process can receive: remove it"
        )


def check_model(model: str) -> str:
    """The model as it will be passed: ``~`` expanded; refused when it would read as an option.

    ``vllm serve -O0`` or ``vllm serve --trust-remote-code`` parse the "model"
    as an option, so a model starting with ``-`` is refused. ``~/models/x`` is
    expanded here, once, so the path that is checked is the path that is passed.

    Raises:
        ConfigError: for a model starting with ``-`` (a NUL byte is refused with the rest
            of the config, :class:`EngineConfig`).
    """
    if model.startswith("-"):
        raise ConfigError(
            f"model {model[:60]!r} starts with '-', so vLLM would read it as an option; "
            f"for a local directory write ./{model[:60]}"
        )
    if model.startswith("~"):
        return os.path.expanduser(model)
    return model


def expansions(key: str) -> list[str]:
    """The vLLM flags that ``key`` abbreviates (empty for a full name or an unknown key)."""
    flags = vllm_table().flag_names
    if key in flags:
        return []
    return sorted(o for o in flags if o.startswith(key))


def check_engine_key(key: str) -> None:
    """Refuses secret-bearing arguments and abbreviations of vLLM's flags.

    argparse accepts any unambiguous prefix of a long option, so
    ``gpu-memory-util`` would reach vLLM as ``gpu-memory-utilization`` without
    tunelab's checks of that knob ever running. Only full names are taken.

    Raises:
        ConfigError: naming the full flag, or where the secret belongs instead.
    """
    if key in SECRET_ENGINE_ARGS:
        raise ConfigError(
            f"engine argument {key!r} carries a secret, and tunelab never stores or writes "
            f"secrets: remove it and export {SECRET_ENGINE_ARGS[key]} in the shell that starts "
            "vLLM instead (vLLM reads it from there)"
        )
    longer = expansions(key)
    if longer:
        raise ConfigError(
            f"engine argument {key!r} is an abbreviation (vLLM would expand it to "
            f"{' or '.join('--' + o for o in longer[:3])}); write the full name, "
            f"for example {longer[0]}"
        )


def is_env_key(key: str) -> bool:
    """Env var names are upper case; engine keys are dashed lower case."""
    return bool(ENV_KEY_RE.match(key))


def env_string(value: Any) -> str:
    """How a typed value is written into the environment (bools as 1/0, like vLLM reads them)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def parse_value(text: str) -> EngineValue:
    """Turns the text of ``--set KEY=VALUE`` into a typed value without a catalogue.

    The catalogue (tuner.knobs) coerces known keys precisely; this is the
    fallback for keys it does not know: JSON objects/arrays, ints, floats,
    true/false, else the string itself.
    """
    stripped = text.strip()
    low = stripped.lower()
    if low in {"true", "false"}:
        return low == "true"
    if stripped.startswith(("{", "[")):
        try:
            # Text that opens with { or [ and parses whole is an object or an array.
            value: dict[str, Any] | list[Any] = json_loads(stripped, what="value")
            return value
        except ValueError as exc:
            raise ConfigError(
                f"value {text[:80]!r} looks like JSON but is not valid: {getattr(exc, 'msg', exc)}"
            ) from None
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        return float(stripped)
    except ValueError:
        return text


def split_assignment(item: str) -> tuple[str, str]:
    """Splits ``KEY=VALUE`` and says clearly what is wrong when it is not that shape."""
    if "=" not in item:
        raise ConfigError(
            f"--set {item!r} has no '=': write KEY=VALUE, for example "
            "--set max-num-seqs=64 or --set VLLM_ROCM_USE_AITER=1"
        )
    key, value = item.split("=", 1)
    key = key.strip()
    if key.startswith("--"):
        key = key[2:]
    if not key:
        raise ConfigError(f"--set {item!r} has an empty key: write KEY=VALUE")
    return key, value
