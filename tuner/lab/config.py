"""An engine config from a preset, a model and ``KEY=VALUE`` items: the one assembly.

``tunelab run/ab/sweep/tune``, ``tunelab check`` and the TUI's start-up all
build their config here (they had three copies that differed in whether the
model was resolved, which variables passed through and whether ``--set`` items
met the engine-argument policy). The rule: the preset's config, else the named
model, else the caller's default (the demo config on a machine without a GPU);
a model replaces the preset's model and keeps its knobs; then the items are
applied — catalogue knobs coerced by the catalogue, ROCR_VISIBLE_DEVICES passed
through as text, secret-bearing arguments refused, code-loading arguments only
with ``allow_code`` (the same policy as an imported preset,
``tuner.export.engine_policy``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.config import (
    ConfigError,
    EngineConfig,
    EngineValue,
    check_engine_key,
    is_env_key,
    parse_value,
    split_assignment,
)
from tuner.cpu_demo import DEMO_MODEL_ALIAS, demo_config, resolve_model
from tuner.errors import TunelabError
from tuner.export.catalog import open_preset
from tuner.export.engine_policy import ALLOW_CODE_OPTION, code_loading
from tuner.export.errors import PresetError
from tuner.export.preset import Preset
from tuner.knobs import parse_assignments
from tuner.redact import is_secret_engine_arg

# ROCR_VISIBLE_DEVICES is read by the ROCm runtime, not by vLLM, and is no catalogue
# knob; --set still takes it so the rules can see it (CUDA_ and HIP_VISIBLE_DEVICES
# are catalogue knobs).
PASSTHROUGH_ENV = frozenset({"ROCR_VISIBLE_DEVICES"})


class ConfigInputError(TunelabError, ValueError):
    """A preset, model or ``KEY=VALUE`` item that cannot make a config; the message says why."""


@dataclass(frozen=True)
class LoadedPreset:
    """A preset and the note its name resolution left (empty unless a name was ambiguous)."""

    preset: Preset
    note: str = ""


def load(preset: str | Path, *, allow_code: bool = False) -> LoadedPreset:
    """The preset by name or path, or :class:`ConfigInputError` saying what is wrong with it."""
    try:
        found, note = open_preset(str(preset), allow_code=allow_code)
    except (PresetError, ConfigError) as exc:
        raise ConfigInputError(str(exc)) from None
    return LoadedPreset(found, note)


def with_model(config: EngineConfig, model: str) -> EngineConfig:
    """``config``'s knobs on another model (the demo alias resolved, a bad path refused)."""
    try:
        return EngineConfig(
            model=resolve_model(model), env=dict(config.env), engine=dict(config.engine)
        )
    except ConfigError as exc:
        raise ConfigInputError(str(exc)) from None


def apply_items(
    config: EngineConfig, items: Sequence[str], *, allow_code: bool = False
) -> EngineConfig:
    """``config`` with the ``KEY=VALUE`` items applied.

    Raises:
        ConfigInputError: an unknown knob, a bad value, a secret-bearing argument, or a
            code-loading argument without ``allow_code``.
    """
    passthrough: dict[str, EngineValue] = {}
    knob_items: list[str] = []
    try:
        for item in items:
            key, value = split_assignment(item)
            if not is_env_key(key) and is_secret_engine_arg(key):
                check_engine_key(key)  # refused with where the secret belongs
            code = code_loading(key, parse_value(value))
            if code and not allow_code:
                raise ConfigInputError(
                    "; ".join(c.message() for c in code)
                    + f". Pass {ALLOW_CODE_OPTION} if you trust it"
                )
            if key in PASSTHROUGH_ENV:
                passthrough[key] = value
            elif code:
                passthrough[key] = parse_value(value)
            else:
                knob_items.append(item)
        return config.with_values({**parse_assignments(knob_items), **passthrough})
    except ConfigError as exc:
        raise ConfigInputError(str(exc)) from None


def build_config(
    preset: str | Path | Preset | None,
    model: str | None,
    items: Sequence[str] = (),
    *,
    default: Callable[[], EngineConfig] | None = None,
    allow_code: bool = False,
) -> EngineConfig:
    """The engine config the faces run or check.

    Args:
        preset: A preset name or file (or one already loaded), or None.
        model: A model id or path (``tunelab:demo`` is the demo config when there is
            no preset), or None.
        items: ``KEY=VALUE`` knob values applied last.
        default: Makes the config when neither a preset nor a model is given; None
            means an empty model (``tunelab check`` then skips the model rules).
        allow_code: Accept code-loading engine arguments (preset and items).

    Raises:
        ConfigInputError: an unusable preset, model or item; nothing was run.
    """
    if preset is not None:
        loaded = (
            preset if isinstance(preset, Preset) else load(preset, allow_code=allow_code).preset
        )
        base = loaded.config if not model else with_model(loaded.config, model)
    elif model == DEMO_MODEL_ALIAS:
        base = demo_config()
    elif model:
        base = with_model(EngineConfig(model=""), model)
    elif default is not None:
        base = default()
    else:
        base = EngineConfig(model="")
    return apply_items(base, items, allow_code=allow_code)
