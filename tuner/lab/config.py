"""An engine config from a preset, a model and ``KEY=VALUE`` items: the one assembly.

``tunelab run/ab/sweep/tune``, ``tunelab check`` and the TUI's start-up all
build their config here (they had three copies that differed in whether the
model was resolved and which errors were caught). The rule: the preset's
config, else the named model, else the caller's default (the demo config on a
machine without a GPU); a ``--model`` replaces the preset's model and keeps
its knobs; then the items are applied — catalogue knobs coerced by the
catalogue, device-selection variables passed through as text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tuner.config import ConfigError, EngineConfig, split_assignment
from tuner.cpu_demo import DEMO_MODEL_ALIAS, demo_config, resolve_model
from tuner.export.errors import PresetError
from tuner.export.preset import Preset, load_preset
from tuner.knobs import parse_assignments

# Device-selection variables vLLM reads but tunelab does not tune (not catalogue knobs).
PASSTHROUGH_ENV = frozenset({"HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})


class ConfigInputError(ValueError):
    """A preset, model or ``KEY=VALUE`` item that cannot make a config; the message says why."""


def load(preset: str | Path) -> Preset:
    """The preset file, or :class:`ConfigInputError` saying what is wrong with it."""
    try:
        return load_preset(preset)
    except (PresetError, ConfigError) as exc:
        raise ConfigInputError(str(exc)) from None


def with_model(config: EngineConfig, model: str) -> EngineConfig:
    """``config``'s knobs on another model (the demo alias resolved, a bad path refused)."""
    try:
        return EngineConfig(
            model=resolve_model(model), env=dict(config.env), engine=dict(config.engine)
        )
    except ConfigError as exc:
        raise ConfigInputError(str(exc)) from None


def apply_items(config: EngineConfig, items: Sequence[str]) -> EngineConfig:
    """``config`` with the ``KEY=VALUE`` items applied (catalogue-coerced; passthrough env as text)."""
    passthrough: dict[str, str] = {}
    knob_items: list[str] = []
    try:
        for item in items:
            key, value = split_assignment(item)
            if key in PASSTHROUGH_ENV:
                passthrough[key] = value
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
) -> EngineConfig:
    """The engine config the faces run or check.

    Args:
        preset: A preset file (or one already loaded), or None.
        model: A model id or path (``tunelab:demo`` is the demo config when there is
            no preset), or None.
        items: ``KEY=VALUE`` knob values applied last.
        default: Makes the config when neither a preset nor a model is given; None
            means an empty model (``tunelab check`` then skips the model rules).

    Raises:
        ConfigInputError: an unusable preset, model or item; nothing was run.
    """
    if preset is not None:
        loaded = preset if isinstance(preset, Preset) else load(preset)
        base = loaded.config if not model else with_model(loaded.config, model)
    elif model == DEMO_MODEL_ALIAS:
        base = demo_config()
    elif model:
        base = with_model(EngineConfig(model=""), model)
    elif default is not None:
        base = default()
    else:
        base = EngineConfig(model="")
    return apply_items(base, items)
