"""Export and import: presets as TOML, launch scripts, vLLM YAML and docker lines.

The winner of a tuning session has to reach production exactly as it was
measured. :mod:`tuner.export.preset` holds the preset schema (version 1) and
its TOML reader/writer; :mod:`tuner.export.validate` checks files from
outside; :mod:`tuner.export.render` writes every format atomically from the
same ``EngineConfig`` methods the engine uses. Only light modules are
imported here, so ``tunelab --help`` stays fast.
"""

from __future__ import annotations

from tuner.export.errors import ExportError, Issue, PresetError
from tuner.export.preset import (
    DEMO_MODEL_PLACEHOLDER,
    SCHEMA_VERSION,
    Preset,
    PresetTarget,
    Provenance,
    dump_preset,
    load_preset,
    loads_preset,
    preset_from_config,
)

__all__ = [
    "DEMO_MODEL_PLACEHOLDER",
    "SCHEMA_VERSION",
    "ExportError",
    "Issue",
    "Preset",
    "PresetError",
    "PresetTarget",
    "Provenance",
    "dump_preset",
    "load_preset",
    "loads_preset",
    "preset_from_config",
]
