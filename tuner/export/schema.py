"""The preset schema (version 1): its dataclasses and constants, without any codec.

Kept apart from the TOML reader/writer (:mod:`tuner.export.preset`) and the
validation of files from outside (:mod:`tuner.export.validate`), so each of
those imports the schema and neither imports the other's internals (no
import cycle). ``docs/presets.md`` documents the tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner import __version__
from tuner.config import EngineConfig

SCHEMA_VERSION = 1

# Written as [target].model for the embedded demo model; resolved to the
# generated model's directory on load (tuner.demo_model.ensure_demo_model).
DEMO_MODEL_PLACEHOLDER = "tunelab:demo"

# Refuse files beyond this size before parsing them: a preset is a few KiB.
MAX_PRESET_BYTES = 1024 * 1024


@dataclass
class PresetTarget:
    """What the preset was tuned for.

    Attributes:
        model: Model id or path as written in the file (``tunelab:demo`` for the demo model).
        vllm_version: vLLM version the preset was made with, e.g. ``"0.11.0"``.
        platform: ``"rocm"``, ``"cuda"`` or ``"cpu"``.
        gpu_name: Marketing name of the GPU (``"AMD Instinct MI300X"``).
        gpu_count: Number of GPUs the config uses.
        driver: Driver or ROCm/CUDA version where known.
    """

    model: str
    vllm_version: str | None = None
    platform: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    driver: str | None = None


@dataclass
class Provenance:
    """Where the preset comes from.

    Attributes:
        sources: Reference sections it follows (``"file name §section"``).
        trial_id: The trial it was exported from, if any.
        config_id: ``EngineConfig.config_id`` at export time; a mismatch on
            load means the file was edited after export.
        notes: Free text.
    """

    sources: list[str] = field(default_factory=list)
    trial_id: str | None = None
    config_id: str | None = None
    notes: str | None = None


@dataclass
class Preset:
    """A named, shareable engine config with its target and provenance.

    Attributes:
        name: Short name, also the base of exported file names.
        config: The engine config (``config.model`` is resolved; see ``target.model``).
        target: What it was tuned for.
        description: One or two sentences on what it is for.
        schema_version: Always :data:`SCHEMA_VERSION` when written by this code.
        tunelab_version: The tunelab that wrote it.
        created: ISO 8601 UTC time of writing.
        workload: The benchmark workload that was measured (trial exports).
        results: The measured results and their noise (trial exports).
        provenance: Sources, trial id, config id.
    """

    name: str
    config: EngineConfig
    target: PresetTarget
    description: str = ""
    schema_version: int = SCHEMA_VERSION
    tunelab_version: str = __version__
    created: str = ""
    workload: dict[str, Any] | None = None
    results: dict[str, Any] | None = None
    provenance: Provenance = field(default_factory=Provenance)
