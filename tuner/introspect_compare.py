"""Where the knob catalogue and the installed vLLM disagree.

The catalogue records, per vLLM version, which environment variables, engine
arguments and values exist; introspection reads them from the installed vLLM.
When the two differ the installed vLLM wins (it is what will run), and the
difference is listed so ``tunelab doctor`` can show it and the catalogue can
be corrected.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tuner import knobs
from tuner.introspect import VllmInfo
from tuner.knobs import AvailabilityStatus, KnobKind
from tuner.knobs.value_sets import lookup, values_for

# Value-set name in the catalogue -> VllmInfo attribute holding the installed list.
VALUE_SET_FIELDS: dict[str, str] = {
    "attention_backends": "attention_backends",
    "cudagraph_modes": "cudagraph_modes",
    "quantization_methods": "quantization_methods",
    "kv_cache_dtypes": "kv_cache_dtypes",
}


@dataclass(frozen=True)
class Difference:
    """One disagreement; the installed vLLM's side is what tunelab acts on.

    Attributes:
        area: ``env``, ``engine`` or a value-set name (``attention_backends``, ...).
        name: The variable, flag or value concerned.
        catalogue: What the catalogue says about it for this version.
        installed: What the installed vLLM says.
    """

    area: str
    name: str
    catalogue: str
    installed: str

    @property
    def message(self) -> str:
        """One line for a terminal."""
        return (
            f"{_AREA_LABEL.get(self.area, self.area)} {self.name}: catalogue says "
            f"{self.catalogue}; the installed vLLM {self.installed} (installed wins)"
        )

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form, with the message."""
        return {**asdict(self), "message": self.message}


_AREA_LABEL = {
    "env": "env var",
    "engine": "engine arg",
    "attention_backends": "attention backend",
    "cudagraph_modes": "cudagraph mode",
    "quantization_methods": "quantization method",
    "kv_cache_dtypes": "KV-cache dtype",
}


def compare_with_catalogue(info: VllmInfo) -> list[Difference]:
    """The differences between the catalogue (for ``info.version``) and ``info``.

    Fields the probe could not read are skipped, not reported as differences.
    Without vLLM there is nothing to compare and the list is empty.
    """
    if not info.available or info.version is None:
        return []
    version = info.version
    out: list[Difference] = []
    out.extend(_compare_knobs(version, KnobKind.ENV, info.env_vars))
    out.extend(_compare_knobs(version, KnobKind.ENGINE, info.engine_args))
    for set_name, attr in VALUE_SET_FIELDS.items():
        installed = getattr(info, attr)
        if installed is not None:
            out.extend(_compare_values(version, set_name, installed))
    return out


def _compare_knobs(
    version: str, kind: KnobKind, installed: tuple[str, ...] | None
) -> list[Difference]:
    if installed is None:
        return []
    have = set(installed)
    out: list[Difference] = []
    for knob in knobs.KNOBS:
        if knob.kind is not kind or knob.extra.get("read_by") or "compilation_field" in knob.extra:
            continue  # read by HIP/RCCL/torch, or folded into another flag
        verdict = knobs.available(knob, version, None)
        area = "env" if kind is KnobKind.ENV else "engine"
        if verdict.status is AvailabilityStatus.AVAILABLE and knob.key not in have:
            out.append(Difference(area, knob.key, f"vLLM {version} has it", "does not have it"))
        elif verdict.status is not AvailabilityStatus.AVAILABLE and knob.key in have:
            out.append(Difference(area, knob.key, verdict.reason, "still has it"))
    return out


def _compare_values(version: str, set_name: str, installed: tuple[str, ...]) -> list[Difference]:
    expected = values_for(set_name, version)
    have = set(installed)
    out = [
        Difference(set_name, name, f"vLLM {version} has it", "does not have it")
        for name in expected
        if name not in have
    ]
    known = set(expected)
    for name in installed:
        if name in known:
            continue
        entry = lookup(set_name, name)
        if entry is None:
            said = "nothing (not in the catalogue)"
        else:
            said = (
                f"it exists only from {entry.since or 'before 0.10'} until {entry.until or 'now'}"
            )
        out.append(Difference(set_name, name, said, "has it"))
    return out


def knob_availability(
    knob: knobs.Knob, version: str | None, platform: str | None, info: VllmInfo | None = None
) -> knobs.Availability:
    """The catalogue's verdict for a target, overruled by the installed vLLM where known.

    Args:
        knob: The catalogue entry.
        version: Target vLLM version (None: unknown).
        platform: Target platform (None: unknown).
        info: The installed vLLM's introspection, used only when it is the
            target (same version); its env-var and engine-arg lists win.
    """
    verdict = knobs.available(knob, version, platform)
    if info is None or not info.available or info.version != version:
        return verdict
    if knob.extra.get("read_by") or "compilation_field" in knob.extra:
        return verdict  # not read through vllm.envs / EngineArgs
    names = info.env_vars if knob.kind is KnobKind.ENV else info.engine_args
    if names is None:
        return verdict
    present = knob.key in names
    if present and verdict.status in (AvailabilityStatus.REMOVED, AvailabilityStatus.NOT_YET):
        # The catalogue thinks it is gone (or not there yet), but this vLLM has it.
        return knobs.available(
            knobs.Knob(**{**_knob_fields(knob), "since": None, "until": None}), None, platform
        )
    if not present and verdict.status is not AvailabilityStatus.REMOVED:
        return knobs.Availability(
            AvailabilityStatus.REMOVED,
            f"the installed vLLM {version} does not read {knob.key}",
            knob.replacement,
        )
    return verdict


def _knob_fields(knob: knobs.Knob) -> dict[str, Any]:
    return {f: getattr(knob, f) for f in knob.__dataclass_fields__}
