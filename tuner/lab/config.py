"""An engine config from a preset, a model and ``KEY=VALUE`` items: the one assembly.

``tunelab run/ab/sweep/tune``, ``tunelab check`` and the TUI's start-up all
build their config here (they had three copies that differed in whether the
model was resolved, which variables passed through and whether ``--set`` items
met the engine-argument policy). The rule: the preset's config, else the named
model, else the caller's default (the demo config on a machine without a GPU);
a model replaces the preset's model and keeps its knobs; then the items are
applied — catalogue knobs coerced by the catalogue, ROCR_VISIBLE_DEVICES passed
through as text — and the whole config meets the one policy on what a config may
make an engine do (:mod:`tuner.policy`: plain data only; code and unknown
variables only with the user's consent), the same check an imported preset and
the trial runner apply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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
from tuner.export.errors import PresetError
from tuner.export.preset import Preset
from tuner.knobs import get as knob_for
from tuner.knobs import parse_assignments
from tuner.policy import Consent, PolicyError, enforce, engine_args, granted
from tuner.studies.space import Param
from tuner.vllm_tables import table as vllm_table


class ConfigInputError(TunelabError, ValueError):
    """A preset, model or ``KEY=VALUE`` item that cannot make a config; the message says why."""


@dataclass(frozen=True)
class LoadedPreset:
    """A preset and the note its name resolution left (empty unless a name was ambiguous)."""

    preset: Preset
    note: str = ""


def load(preset: str | Path, *, consent: Consent | None = None) -> LoadedPreset:
    """The preset by name or path, or :class:`ConfigInputError` saying what is wrong with it.

    ``consent`` (default: this process's, :func:`tuner.policy.granted`) decides which
    code-loading arguments and unknown variables the preset may carry.
    """
    allowed = granted() if consent is None else consent
    try:
        found, note = open_preset(str(preset), allow_env=allowed.env, allow_code=allowed.code)
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
    config: EngineConfig, items: Sequence[str], *, consent: Consent | None = None
) -> EngineConfig:
    """``config`` with the ``KEY=VALUE`` items applied.

    Catalogue knobs are coerced by the catalogue. Any other environment variable, and any
    other argument of ``vllm serve`` (``kv-transfer-config``, ``seed`` ...), passes as
    written (parsed like JSON where it is JSON) and the policy decides, so ``--set`` takes
    exactly what a preset may carry; a key that is neither is an unknown knob, with the
    nearest names.

    Raises:
        ConfigInputError: an unknown knob, a bad value, a secret-bearing argument, or what
            the policy refuses under ``consent`` (default: this process's).
    """
    allowed = granted() if consent is None else consent
    passthrough: dict[str, EngineValue] = {}
    knob_items: list[str] = []
    try:
        for item in items:
            key, value = split_assignment(item)
            if is_env_key(key) and knob_for(key) is None:
                passthrough[key] = value
            elif not is_env_key(key) and knob_for(key) is None and _is_vllm_argument(key):
                check_engine_key(key)  # secrets refused with where they belong
                passthrough[key] = parse_value(value)
            else:
                knob_items.append(item)
        applied = config.with_values({**parse_assignments(knob_items), **passthrough})
    except ConfigError as exc:
        raise ConfigInputError(str(exc)) from None
    _enforce(applied, allowed)
    return applied


def _is_vllm_argument(key: str) -> bool:
    """True for a flag of ``vllm serve`` (the release's table) or a known code loader."""
    return key in vllm_table().flag_names or key in engine_args.CODE_LOADING_ARGS


def enforce_policy(config: EngineConfig, consent: Consent | None = None) -> None:
    """Refuses, before any work, a config the policy refuses (a stored trial's, a job spec's).

    Raises:
        ConfigInputError: what the policy refuses under ``consent`` (default: this process's),
            with the fix.
    """
    _enforce(config, granted() if consent is None else consent)


def enforce_params(
    base: EngineConfig, params: Iterable[Param], consent: Consent | None = None
) -> None:
    """Refuses, before any trial, a sweep or search whose values the policy refuses.

    Every listed value (a range's bounds) is applied to ``base`` and checked, so
    ``--param LD_PRELOAD=/a.so,/b.so`` stops here with the policy's message instead of
    skipping trial after trial; the trial runner still checks each point it runs.

    Raises:
        ConfigInputError: the first refused value, with the fix.
    """
    allowed = granted() if consent is None else consent
    for param in params:
        if param.is_workload:
            continue
        values = param.choices if param.kind == "categorical" else (param.low, param.high)
        for value in values:
            try:
                point = base.with_values({param.key: value})
            except ConfigError as exc:
                raise ConfigInputError(str(exc)) from None
            _enforce(point, allowed)


def _enforce(config: EngineConfig, consent: Consent) -> None:
    """The policy's refusals as the faces' input error (nothing has run)."""
    try:
        enforce(config, consent)
    except PolicyError as exc:
        raise ConfigInputError(exc.message, fix=exc.fix) from None


def build_config(
    preset: str | Path | Preset | None,
    model: str | None,
    items: Sequence[str] = (),
    *,
    default: Callable[[], EngineConfig] | None = None,
    consent: Consent | None = None,
) -> EngineConfig:
    """The engine config the faces run or check.

    Args:
        preset: A preset name or file (or one already loaded), or None.
        model: A model id or path (``tunelab:demo`` is the demo config when there is
            no preset), or None.
        items: ``KEY=VALUE`` knob values applied last.
        default: Makes the config when neither a preset nor a model is given; None
            means an empty model (``tunelab check`` then skips the model rules).
        consent: What the user allowed beyond plain data (default: this process's,
            :func:`tuner.policy.granted`); the built config must meet the policy under it.

    Raises:
        ConfigInputError: an unusable preset, model or item, or a config the policy
            refuses; nothing was run.
    """
    if preset is not None:
        loaded = preset if isinstance(preset, Preset) else load(preset, consent=consent).preset
        base = loaded.config if not model else with_model(loaded.config, model)
    elif model == DEMO_MODEL_ALIAS:
        base = demo_config()
    elif model:
        base = with_model(EngineConfig(model=""), model)
    elif default is not None:
        base = default()
    else:
        base = EngineConfig(model="")
    return apply_items(base, items, consent=consent)
